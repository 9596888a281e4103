"""Whether the runtime installed beside the generator serves the package it just wrote.

A build pipeline may install the generator alone: the runtime (``mcp_tasks``, the
distribution ``mcptask-runtime``) is then not importable and nothing is said. When it is, its
``serves`` module is asked, the one home of the rule the runtime applies when it is given a
handler (``runtime.bindings.adopt``), so that a package the runtime cannot serve is named
when it is written, in one line (which runtime, why), not first at deploy. The module imports
only the runtime's ``descriptor``: the question costs no engine and no ``mcp`` SDK.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from importlib.util import find_spec

from mcptask_gen import BINDINGS_API, runtime_requirement
from mcptask_gen.ir import IR

#: the import name of the runtime's package, and its module that says what it serves
RUNTIME_PACKAGE = "mcp_tasks"
SERVES = f"{RUNTIME_PACKAGE}.serves"


def _installed() -> bool:
    try:
        return find_spec(RUNTIME_PACKAGE) is not None
    except (ImportError, ValueError):
        return False


def runtime_problem(faces: Sequence[IR], package: str, where: str) -> str | None:
    """One line when the installed runtime cannot serve the package ``package`` (written to
    ``where``) of ``faces``, or could not be asked; None when it serves it, or when no
    runtime is installed (or the package is the runtime's own name, which it would shadow)."""
    if package.split(".")[0] == RUNTIME_PACKAGE or not _installed():
        return None
    try:
        serves = importlib.import_module(SERVES)
        verdict = serves.verdict(
            [(ir.revision, ir.kind, ir.extension.id if ir.extension else None) for ir in faces],
            BINDINGS_API,
            runtime_requirement(faces[0].generator_version),
            package,
        )
        problem = verdict.problem()
        runtime = serves.version()
    except Exception as exc:  # an older runtime without ``serves``, or a broken install
        return (
            f"could not ask the installed {RUNTIME_PACKAGE} whether it serves {where}"
            f" ({type(exc).__name__}: {exc})"
        )
    if problem is None:
        return None
    return f"the installed runtime ({runtime}) cannot serve {where}: {problem}"
