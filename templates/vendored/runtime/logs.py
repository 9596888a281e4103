"""The generated package's name, and its loggers, wherever a runtime module sits.

The runtime's modules live at different depths (``PACKAGE.runtime.engine.guard``,
``PACKAGE.runtime.ops.app``); the loggers they share are named from the package's root, once
here: ``PACKAGE.runtime`` (the runtime's own messages), ``PACKAGE.audit`` (R-SEC-5) and
``PACKAGE.worker`` (the worker process)."""

from __future__ import annotations

import logging
from typing import Final

__all__ = ["PACKAGE", "logger"]

#: the generated package this runtime is part of (this module is ``PACKAGE.runtime.logs``)
PACKAGE: Final = __name__.rsplit(".", 2)[0]


def logger(name: str) -> logging.Logger:
    """The package's logger ``PACKAGE.<name>`` (``runtime``, ``audit``, ``worker``)."""
    return logging.getLogger(f"{PACKAGE}.{name}")
