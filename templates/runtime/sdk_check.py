"""Importing this module fails with one line naming what to install when the ``mcp`` SDK is
missing: the runtime's serving and client modules, ``mcptask`` and the example server need
it (the ``mcp`` extra); the engine and the stores do not.

``_sdk`` (the one module that imports the SDK's corners) and the example server import it
first, so a missing SDK is one line, exit 2, for a command run with ``python -m``, and
otherwise reads ``ModuleNotFoundError: the mcp SDK is not installed ...: pip install ...`` rather than
``No module named 'mcp_types'`` from deep inside an import."""

from __future__ import annotations

import sys
from importlib.util import find_spec
from typing import Final

__all__ = ["SDK_MISSING"]

#: what to install, said once
SDK_MISSING: Final = (
    "the mcp SDK is not installed (the 'mcp' extra): pip install 'mcp>=2.3,<2.4' uvicorn,"
    " or from the mcptask-gen checkout: pip install -e '.[mcp]'"
)


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
