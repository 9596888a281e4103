"""``TaskFeed``: the live changes of one engine's tasks, for the dashboard's event stream.

Each change this engine makes or learns of (a task created, a status change, a task
expired: the engine's events, observed inline) goes to every subscriber as one event: ``{"kind": "created" | "status", "task":
view}`` or ``{"kind": "expired", "taskId": ...}``. Nothing is built while nobody listens. A
subscriber that falls ``BACKLOG`` events behind gets one ``{"kind": "resync"}`` instead of
what it missed (it lists again).
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio

from ...store import TaskRecord
from ..engine.task_engine import TaskEngine
from .views import task_view

__all__ = ["BACKLOG", "Subscription", "TaskFeed"]

BACKLOG = 512


class Subscription:
    """One listener's queue of events."""

    def __init__(self) -> None:
        self.queue: deque[dict[str, Any]] = deque()
        self.resync = False
        self._ready = anyio.Event()

    def put(self, event: dict[str, Any]) -> None:
        if len(self.queue) >= BACKLOG:
            self.queue.clear()
            self.resync = True
        elif not self.resync:
            self.queue.append(event)
        self._ready.set()

    async def next(self) -> list[dict[str, Any]]:
        """The events since the last call (waits for one)."""
        await self._ready.wait()
        self._ready = anyio.Event()
        if self.resync:
            self.resync = False
            self.queue.clear()
            return [{"kind": "resync"}]
        out = list(self.queue)
        self.queue.clear()
        return out


class TaskFeed:
    """Events of ``engine``'s tasks to subscribers (see the module's docstring)."""

    def __init__(self, engine: TaskEngine) -> None:
        self.engine = engine
        self._subs: set[Subscription] = set()
        engine.on_created.append(self._created)
        engine.events.on_changed.append(self._status)
        engine.on_expired.append(self._expired)

    def close(self) -> None:
        engine = self.engine
        for listeners, fn in (
            (engine.on_created, self._created),
            (engine.events.on_changed, self._status),
            (engine.on_expired, self._expired),
        ):
            if fn in listeners:
                listeners.remove(fn)

    @property
    def subscribers(self) -> int:
        return len(self._subs)

    @asynccontextmanager
    async def subscribe(self) -> AsyncIterator[Subscription]:
        sub = Subscription()
        self._subs.add(sub)
        try:
            yield sub
        finally:
            self._subs.discard(sub)

    def _push(self, event: dict[str, Any]) -> None:
        for sub in list(self._subs):
            sub.put(event)

    def _created(self, rec: TaskRecord) -> None:
        if self._subs:
            self._push({"kind": "created", "task": task_view(rec, self.engine.clock())})

    def _status(self, rec: TaskRecord) -> None:
        if self._subs:
            self._push({"kind": "status", "task": task_view(rec, self.engine.clock())})

    def _expired(self, rec: TaskRecord) -> None:
        if self._subs:
            self._push({"kind": "expired", "taskId": rec.task_id})
