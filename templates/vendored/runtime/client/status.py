"""What a requestor tells its caller about a task it follows, on either face: the task
when its status changed (a poll that saw nothing new calls nothing),
and, on the tasks extension, its progress (a task there sends no ``notifications/progress``,
X-NOTIF-7: its progress is its ``statusMessage``); and what it refuses to send
(:class:`TaskNotSupported`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ...protocol import WORKING

__all__ = ["TaskNotSupported", "call_back", "changes_only", "progress_of_status"]


class TaskNotSupported(Exception):
    """The server did not declare what a task-augmented call needs (R-CAP-3, R-TOOL-1/2),
    the negotiated revision has no such request (``tasks/list`` on the tasks extension,
    X-COMPAT-4), or a typed client of another face was given (``client.typed``)."""


#: ``fn(task)``, plain or async
TaskCallback = Callable[[Any], Awaitable[None] | None]
#: ``fn(progress, total, message)``, async
ProgressFn = Callable[[float, float | None, str | None], Awaitable[None]]


async def call_back(callback: TaskCallback | None, task: Any) -> None:
    """``callback(task)``, awaited when it returns an awaitable; None: nothing."""
    if callback is not None and (out := callback(task)) is not None:
        await out


def _status(task: Any) -> str:
    status = task.status
    return str(getattr(status, "value", status))


def changes_only(callback: TaskCallback | None) -> TaskCallback | None:
    """``callback`` called with the first task it is given and then only when the task's
    status differs from the last one it was called with (progress is ``on_progress``'s)."""
    if callback is None or isinstance(callback, _WithProgress):  # it sees every poll
        return callback
    last: list[str] = []

    def on_change(task: Any) -> Awaitable[None] | None:
        status = _status(task)
        if last and last[0] == status:
            return None
        last[:] = [status]
        return callback(task)

    return on_change


class _WithProgress:
    """An ``on_status`` (called at status changes) that also gives ``on_progress`` each new
    ``statusMessage`` of a ``working`` task; it is called at every poll."""

    def __init__(self, on_status: TaskCallback | None, on_progress: ProgressFn) -> None:
        self.on_status = changes_only(on_status)
        self.on_progress = on_progress
        self.last: str | None = None
        self.count = 0

    async def __call__(self, task: Any) -> None:
        await call_back(self.on_status, task)
        message = getattr(task, "statusMessage", None)
        if _status(task) == WORKING and message and message != self.last:
            self.last, self.count = message, self.count + 1
            await self.on_progress(float(self.count), None, message)


def progress_of_status(on_status: TaskCallback | None, on_progress: ProgressFn) -> TaskCallback:
    """An ``on_status`` that also gives ``on_progress`` each new ``statusMessage`` of a
    ``working`` task: ``on_progress(n, None, message)``, ``n`` counting them from 1 (the
    extension's tasks carry no progress numbers)."""
    return _WithProgress(on_status, on_progress)
