"""The default runtime: ``TaskEngine`` over an ``InMemoryTaskStore`` or a ``SqliteTaskStore``.

Built only on this package's own modules (plus the standard library, pydantic and anyio).
"""

from __future__ import annotations

from .cursor import CursorCodec, CursorError
from .engine import EngineConfig, PendingInput, TaskContext, TaskEngine
from .memory import InMemoryTaskStore
from .sqlite import SqliteTaskStore

__all__ = [
    "CursorCodec",
    "CursorError",
    "EngineConfig",
    "InMemoryTaskStore",
    "PendingInput",
    "SqliteTaskStore",
    "TaskContext",
    "TaskEngine",
]
