"""The default runtime: ``TaskEngine`` over a ``TaskStore`` (``InMemoryTaskStore``,
``SqliteTaskStore``, ``RedisTaskStore``), and each face's default handler on it:
``CoreTasks`` (2025-11-25) and, when the package has the tasks extension's face,
``ExtensionTasks`` (both from the generated ``faces`` module, which knows the faces).
``store_from_url("memory:" | "sqlite:PATH" | "redis://...")`` makes a store from a URL.

Built only on this package's own modules (plus the standard library, pydantic and anyio).
``__version__`` is the runtime's version: that of the mcptask-gen that wrote this package.
"""

from __future__ import annotations

from ..descriptor import GENERATOR_VERSION as __version__
from . import faces
from .engine.cursor import CursorCodec, CursorError
from .engine.task_engine import (
    DEFAULT,
    EngineConfig,
    InputRequest,
    PendingInput,
    TaskContext,
    TaskEngine,
    TaskView,
)
from .faces import *  # noqa: F403 (each face's default handler: CoreTasks, ExtensionTasks)
from .stores.memory import InMemoryTaskStore
from .stores.sqlite import SqliteTaskStore
from .stores.url import check_store, store_from_url

__all__ = [
    "DEFAULT",
    "CursorCodec",
    "CursorError",
    "EngineConfig",
    "InMemoryTaskStore",
    "InputRequest",
    "PendingInput",
    "SqliteTaskStore",
    "TaskContext",
    "TaskEngine",
    "TaskView",
    "__version__",
    "check_store",
    "store_from_url",
]
__all__ += faces.__all__
