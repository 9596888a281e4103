"""Importing this module fails with one line naming what to install when the ``mcp`` SDK is
missing: the runtime's serving and client modules, ``mcptask`` and the example server need
it (the ``mcp`` extra); the engine and the stores do not.

``_sdk`` (the one module that imports the SDK's corners) and the example server import it
first, so a missing SDK is one line, exit 2, for a command run with ``python -m``, and
otherwise reads ``ModuleNotFoundError: the mcp SDK is not installed ...: pip install ...`` rather than
``No module named 'mcp_types'`` from deep inside an import. ``require_extra`` does the same
for the other extras, where a command needs one: ``ops`` (``--ops``) and ``workers`` (the
worker, ``--on-workers``)."""

from __future__ import annotations

import sys
from importlib.util import find_spec
from typing import Final

from ..parts import install, missing

__all__ = ["SDK_MISSING", "require_extra"]

#: what to install, said once (the ``runtime`` part's lines, from the package's descriptor)
SDK_MISSING: Final = f"the mcp SDK is not installed (the 'mcp' extra): {install('runtime')}"


def require_extra(prog: str, extra: str, wanted_by: str) -> None:
    """Exit 2 with one line on stderr when ``extra`` is not installed for ``wanted_by`` (a
    flag or command) of the command ``prog``."""
    if (text := missing(extra)) is not None:
        sys.stderr.write(f"{prog}: error: {wanted_by} needs {text}\n")
        raise SystemExit(2)


def _running_as_command() -> str | None:
    """This package's module run by ``python -m`` (the example server), else None."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    name = str(getattr(spec, "name", "") or "")
    return name if name.split(".")[0] == __name__.split(".")[0] else None


if find_spec("mcp") is None or find_spec("mcp_types") is None:
    if (command := _running_as_command()) is not None:  # a command: one line, exit 2
        sys.stderr.write(f"python -m {command}: error: {SDK_MISSING}\n")
        raise SystemExit(2)
    raise ModuleNotFoundError(SDK_MISSING, name="mcp")
