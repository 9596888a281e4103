"""Template helpers that lay out Python the way black (line length 100) would.

Black still formats every rendered module, so these change nothing in the output; they make
the built-in templates render black-clean, and black is twice as fast on a clean module (it
formats a second time whenever the first pass changed anything). A test keeps the built-in
templates black-clean for the pinned schema; a layout these helpers get wrong for some other
schema costs speed only.
"""

from __future__ import annotations

from collections.abc import Iterable

from mcptask_gen.fmt import LINE_LENGTH


def pyrepr(value: object) -> str:
    """A Python literal with black's string normalisation (double quotes where no escape
    is added); tuples and lists of such literals likewise."""
    if isinstance(value, str):
        text = repr(value)
        if not text.startswith("'"):
            return text
        body = text[1:-1]
        # black keeps single quotes only when double quotes would need more escapes
        if value.count('"') > body.count("\\'"):
            return text
        return '"' + body.replace("\\'", "'").replace('"', '\\"') + '"'
    if isinstance(value, tuple):
        items = [pyrepr(v) for v in value]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if isinstance(value, list):
        return "[" + ", ".join(pyrepr(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{pyrepr(k)}: {pyrepr(v)}" for k, v in value.items()) + "}"
    if value is None or isinstance(value, (bool, int, float)):
        return repr(value)
    # not a literal: an undefined template name above all, which repr() would write as text
    raise TypeError(f"pyrepr: {type(value).__name__} is not a Python literal")


def bracket(
    head: str,
    items: Iterable[str],
    tail: str = "",
    indent: int = 0,
    *,
    collection: bool = False,
    brackets: str = "()",
) -> str:
    """``head(item, item)tail`` at ``indent``, split as black splits a right-hand bracket:
    one line when it fits; else the items on one indented line (calls and signatures only);
    else one item a line with a trailing comma."""
    parts = list(items)
    pad, inner = " " * indent, " " * (indent + 4)
    opening, closing = brackets[0], brackets[1]
    body = ", ".join(parts)
    one = f"{pad}{head}{opening}{body}{closing}{tail}"
    if len(one) <= LINE_LENGTH or not parts:
        return one
    if not collection and len(inner) + len(body) <= LINE_LENGTH:
        return f"{pad}{head}{opening}\n{inner}{body}\n{pad}{closing}{tail}"
    lines = "".join(f"{inner}{p},\n" for p in parts)
    return f"{pad}{head}{opening}\n{lines}{pad}{closing}{tail}"


def fset(
    head: str, values: Iterable[object], tail: str = "", indent: int = 0, ctor: str | None = None
) -> str:
    """``head frozenset({...}) tail`` at ``indent``: one line when it fits, else black's
    exploded form (the set literal inside the call, one member a line)."""
    members = [f"{ctor}({pyrepr(v)})" if ctor else pyrepr(v) for v in values]
    if not members:
        return f"{' ' * indent}{head}frozenset(){tail}"
    one = f"{' ' * indent}{head}frozenset({{{', '.join(members)}}}){tail}"
    if len(one) <= LINE_LENGTH:
        return one
    inner = bracket("", members, "", indent + 4, collection=True, brackets="{}")
    return f"{' ' * indent}{head}frozenset(\n{inner}\n{' ' * indent}){tail}"


def union(names: Iterable[str], indent: int, prefix: str = "") -> str:
    """``A | B | C`` (each name after ``prefix``) as one item of a bracket at ``indent`` (a
    trailing comma follows it): one line when it fits, else one operand a line, each after the
    first led by ``|``."""
    parts = [prefix + n for n in names]
    pad = " " * indent
    one = " | ".join(parts)
    if len(pad) + len(one) + 1 <= LINE_LENGTH:
        return one
    return f"\n{pad}| ".join(parts)
