"""The one sink of what happens to tasks in an engine: created, status changed, ended,
expired. Its subscribers are the operators' views (metrics, the dashboard's feed), the
status notifications (``mcp_sessions.py``) and the engine's own limits.

- **Observers** (``on_created``, ``on_changed``, ``on_expired``: plain functions,
  ``fn(record)``) are called inline as the event happens: keep them cheap. The operators'
  views are observers, so they see every change even while a notifier is stuck.
- **Status listeners** (``on_status``: ``async fn(record)``, R-NOTIFY-1) are queued and
  called in order, after the change, by one drainer at a time: the sender task, or the task
  that raised the change once its own job is done (``status(rec, later=True)``, then
  ``drain()``: a run's task after it stored its outcome, woke its waiters and ran the end
  hooks, which saves the sender's wake-up on the hot path). A result is never held back by
  a notification: waiters are woken before the event is even raised (``supervisor.py``). A
  listener that blocks holds back the later notifications (at most ``QUEUE_MAX`` are kept;
  the oldest go first, logged), never a result nor an observer.
- **End hooks** (``on_ended``: ``async fn(record, size)``) run inline after a task ended here,
  ``size`` the bytes its outcome keeps: the engine's retention (R-SEC-4).

This module imports no other part of the engine.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable

import anyio

from ...store import TaskRecord
from ..logs import logger
from .audit import audit

__all__ = ["EndHook", "EngineEvents", "RecordListener", "StatusListener"]

log = logger("runtime")

#: A listener of status changes: called with the task's new record (R-NOTIFY-1).
StatusListener = Callable[[TaskRecord], Awaitable[None]]
#: An observer: called inline with the record.
RecordListener = Callable[[TaskRecord], None]
#: Called once a task ended here, with the bytes its outcome keeps.
EndHook = Callable[[TaskRecord, int], Awaitable[None]]

#: status notifications queued at most (the oldest are dropped beyond)
QUEUE_MAX = 10_000


class EngineEvents:
    """One engine's events and their subscribers (see the module)."""

    def __init__(self) -> None:
        self.on_status: list[StatusListener] = []
        self.on_created: list[RecordListener] = []
        self.on_changed: list[RecordListener] = []
        self.on_expired: list[RecordListener] = []
        self.on_ended: list[EndHook] = []
        self._queue: deque[TaskRecord] = deque()
        self._idle: anyio.Event | None = None
        self._draining = False
        #: status notifications dropped because the queue was full
        self.dropped = 0

    # ------------------------------------------------------------------ raising
    def created(self, rec: TaskRecord) -> None:
        if self.on_created:
            _tell(self.on_created, rec)

    def status(self, rec: TaskRecord, *, audited: bool = True, later: bool = False) -> None:
        """A task's status changed: audited (unless the caller audits it its own way), told
        to the observers now, and queued for the status listeners; ``later``: the caller
        calls ``drain()`` once its own job is done (the sender is not woken)."""
        if audited:
            audit("status_changed", rec.requestor, rec.task_id, status=rec.status.value)
        if self.on_changed:
            _tell(self.on_changed, rec)
        if self.on_status:
            queue = self._queue
            if len(queue) >= QUEUE_MAX:
                old = queue.popleft()
                self.dropped += 1
                if self.dropped == 1 or self.dropped % 1000 == 0:
                    log.warning(
                        "status notifications are not taken (a listener blocks):"
                        " %d dropped, the oldest first (task %s)", self.dropped, old.task_id,
                    )  # fmt: skip
            queue.append(rec)
            idle = self._idle
            if idle is not None and not later:
                self._idle = None
                idle.set()

    async def ended(self, rec: TaskRecord, size: int) -> None:
        for hook in self.on_ended:
            try:
                await hook(rec, size)
            except Exception:
                log.exception("end hook failed for task %s", rec.task_id)

    def expired(self, rec: TaskRecord) -> None:
        audit("expired", rec.requestor, rec.task_id, status=rec.status.value)
        if self.on_expired:
            _tell(self.on_expired, rec)

    # ------------------------------------------------------------------ sending
    def pending(self) -> int:
        """Status notifications queued, not sent yet."""
        return len(self._queue)

    async def send(self) -> None:
        """Send the queued status notifications as they come, until cancelled (one task of
        the engine's group)."""
        while True:
            await self.drain()
            idle = self._idle = anyio.Event()
            await idle.wait()

    async def drain(self) -> None:
        """Send what is queued, in order, here; nothing when another task is sending (it
        sends what is queued meanwhile too)."""
        if self._draining:
            return
        self._draining = True
        try:
            queue = self._queue
            while queue:
                await self._send(queue.popleft())
        finally:
            self._draining = False

    async def _send(self, rec: TaskRecord) -> None:
        for listener in list(self.on_status):
            try:
                await listener(rec)
            except Exception:
                log.exception("status notification failed for task %s", rec.task_id)


def _tell(listeners: list[RecordListener], rec: TaskRecord) -> None:
    for listener in listeners:
        try:
            listener(rec)
        except Exception:
            log.exception("task listener failed for task %s", rec.task_id)
