"""The task engine: tasks' lives (status, result, inputs, ttl, limits, audit, wake-ups),
no MCP and no wire format. ``TaskEngine`` is the front (:mod:`.task_engine`); the names a
handler or a tool uses are exported here."""

from .config import EngineConfig
from .events import RecordListener, StatusListener
from .limits import DEFAULT
from .runs import InputRequest, PendingInput, TaskContext, TaskView
from .task_engine import TaskEngine

__all__ = [
    "DEFAULT",
    "EngineConfig",
    "InputRequest",
    "PendingInput",
    "RecordListener",
    "StatusListener",
    "TaskContext",
    "TaskEngine",
    "TaskView",
]
