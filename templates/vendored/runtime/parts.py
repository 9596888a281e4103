"""What each optional part of the runtime needs installed, and the one line that says so.

The one home of that rule: the modules a part imports (below), and its requirement lines and
extra (the package's ``descriptor.PARTS``, with the version ranges mcptask-gen was tested
with). A part imported without its extra raises ``ModuleNotFoundError`` in one line naming
the extra and what to install (:func:`require`), rather than ``No module named 'redis'`` from
deep inside an import; a command that needs one exits 2 with the same line
(``sdk.check.require_extra``)."""

from __future__ import annotations

from importlib.util import find_spec
from typing import Final

from .. import descriptor, serves

__all__ = ["EXTRA", "MODULES", "install", "missing", "require"]

#: the top-level modules each part imports beyond the bindings' own (pydantic, anyio)
MODULES: Final[dict[str, tuple[str, ...]]] = {
    "runtime": ("mcp", "mcp_types", "uvicorn"),
    "redis": ("redis",),
    "ops": ("prometheus_client",),
    "workers": ("docket", "redis"),
}
#: part -> the extra of the runtime's distribution that installs it (the runtime's is ``mcp``)
EXTRA: Final[dict[str, str]] = {
    name: part.extra for name, part in descriptor.PARTS.items() if part.extra is not None
}
#: the runtime's distribution (``serves``), and where it is built in a clone of the
#: mcptask-gen repository
DISTRIBUTION: Final = serves.DISTRIBUTION
CHECKOUT: Final = "./generated"


def _absent(module: str) -> bool:
    try:
        return find_spec(module) is None
    except (ImportError, ValueError):  # an import hook that refuses it
        return True


def install(part: str) -> str:
    """How to install ``part``: "pip install LINES... (the extra EXTRA of the runtime's
    distribution; from a clone of the mcptask-gen repository: pip install './generated[EXTRA]')"."""
    pins = " ".join(f"'{line}'" for line in descriptor.PARTS[part].requires)
    extra = EXTRA[part]
    return (
        f"pip install {pins} (the '{extra}' extra of {DISTRIBUTION}; from a clone of the "
        f"mcptask-gen repository: pip install '{CHECKOUT}[{extra}]')"
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
