"""The template context, described from the IR's own definitions (``--list-template-context``):
every name a ``--templates`` template can use, so the reference cannot go stale."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable

from mcptask_gen import ir, shape

#: Names besides ``ir`` that every template sees, and their meaning.
GLOBALS = {
    "ir": (
        "the IR (below): in a face's template (faces/<kind>/, written into <face>/) that face's; "
        "in a top-level template the package's (the newest core face, else the first, with "
        "the errors of every face)"
    ),
    "faces": "every face's IR, ordered by revision (one per schema)",
    "core": "the newest core face's IR, or None (a package of an extension's schema alone)",
    "header": "the '@generated / DO NOT EDIT' comment block every module starts with",
    "models_code": "faces/<kind>/models.py.jinja only: datamodel-code-generator's module (docstring, imports, models)",
}
FILTERS = {
    "pyrepr": "a Python literal of a value (strings in double quotes, as black writes them)",
    "tojson": "JSON of a value, keys sorted",
}
FUNCTIONS: dict[str, Callable[..., str]] = {
    "bracket": shape.bracket,
    "fset": shape.fset,
    "union": shape.union,
}


def ir_classes() -> list[type]:
    """The IR dataclasses, ``IR`` first, then the types its fields hold."""
    return [
        ir.IR,
        ir.MethodIR,
        ir.AugmentableIR,
        ir.ErrorIR,
        ir.MetaKeyIR,
        ir.ToolTaskSupportIR,
        ir.ExtensionIR,
    ]


def _type_name(hint: object) -> str:
    if isinstance(hint, type):
        return hint.__name__
    return str(hint).replace("typing.", "").replace("mcptask_gen.ir.", "")


def describe() -> str:
    """The reference, as text."""
    out = ["Template context (jinja2, StrictUndefined):", ""]
    out += [f"  {name}: {text}" for name, text in GLOBALS.items()]
    out += ["", "Filters:"] + [f"  {name}: {text}" for name, text in FILTERS.items()]
    out += ["", "Functions (black-shaped Python source):"]
    for name, fn in FUNCTIONS.items():
        summary = (inspect.getdoc(fn) or "").split("\n\n")[0].replace("\n", " ")
        out.append(f"  {name}{inspect.signature(fn)}: {summary}")
    for cls in ir_classes():
        hints = typing.get_type_hints(cls)
        doc = (inspect.getdoc(cls) or "").replace("\n", " ")
        prefix = "ir" if cls is ir.IR else cls.__name__
        out += ["", f"{cls.__name__}: {doc}"]
        for f in dataclasses.fields(cls):
            out.append(f"  {prefix}.{f.name}: {_type_name(hints[f.name])} -- {f.metadata['doc']}")
    return "\n".join(out) + "\n"
