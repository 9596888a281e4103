"""The default runtime: ``TaskEngine`` over an ``InMemoryTaskStore`` or a ``SqliteTaskStore``.

Built only on this package's own modules (plus the standard library, pydantic and anyio).
"""

from __future__ import annotations

from .cursor import CursorCodec, CursorError
from .engine import (
    DEFAULT,
    EngineConfig,
    InputRequest,
    PendingInput,
    TaskContext,
    TaskEngine,
    TaskView,
)
from .face_2025 import Face2025
from .memory import InMemoryTaskStore
from .sqlite import SqliteTaskStore

__all__ = [
    "DEFAULT",
    "CursorCodec",
    "CursorError",
    "EngineConfig",
    "Face2025",
    "InMemoryTaskStore",
    "InputRequest",
    "PendingInput",
    "SqliteTaskStore",
    "TaskContext",
    "TaskEngine",
    "TaskView",
]
