"""What each optional part of the runtime needs installed, and the one line that says so.

The one home of that rule: the modules a part imports (below) and its requirement lines (the
package's ``descriptor.PARTS``, with the version ranges mcptask-gen was tested with). A part
imported without its extra raises ``ModuleNotFoundError`` in one line naming the extra and
what to install (:func:`require`), rather than ``No module named 'redis'`` from deep inside an
import; a command that needs one exits 2 with the same line (``sdk_check.require_extra``)."""

from __future__ import annotations

from importlib.util import find_spec
from typing import Final

from .. import descriptor

__all__ = ["EXTRA", "MODULES", "install", "missing", "require"]

#: the top-level modules each part imports beyond the bindings' own (pydantic, anyio)
MODULES: Final[dict[str, tuple[str, ...]]] = {
    "runtime": ("mcp", "mcp_types", "uvicorn"),
    "redis": ("redis",),
    "ops": ("prometheus_client",),
    "workers": ("docket", "redis"),
}
#: part -> the extra of mcptask-gen that installs it (the runtime's is ``mcp``)
EXTRA: Final[dict[str, str]] = {
    "runtime": "mcp",
    "redis": "redis",
    "ops": "ops",
    "workers": "workers",
}


def _absent(module: str) -> bool:
    try:
        return find_spec(module) is None
    except (ImportError, ValueError):  # an import hook that refuses it
        return True


def install(part: str) -> str:
    """How to install ``part``: "pip install LINES..., or from the mcptask-gen checkout: ..."."""
    pins = " ".join(f"'{line}'" for line in descriptor.PARTS[part].requires)
    return (
        f"pip install {pins}, or from the mcptask-gen checkout: pip install -e '.[{EXTRA[part]}]'"
    )


def missing(part: str, modules: tuple[str, ...] | None = None) -> str | None:
    """What to install when a module ``part`` needs (``modules``, by default all of
    :data:`MODULES`) is missing: "the 'EXTRA' extra (X is not installed): pip install ...";
    None when all are there."""
    absent = [m for m in (MODULES[part] if modules is None else modules) if _absent(m)]
    if not absent:
        return None
    verb = "is" if len(absent) == 1 else "are"
    return (
        f"the '{EXTRA[part]}' extra ({' and '.join(absent)} {verb} not installed): {install(part)}"
    )


def require(part: str, importer: str, *modules: str) -> None:
    """Raise ``ModuleNotFoundError`` (one line) when a module ``part`` needs is missing
    (``modules``, by default all it needs); ``importer`` is the module asking (its
    ``__name__``)."""
    wanted = modules or MODULES[part]
    text = missing(part, wanted)
    if text is not None:
        first = next(m for m in wanted if _absent(m))
        raise ModuleNotFoundError(f"{importer} needs {text}", name=first)
