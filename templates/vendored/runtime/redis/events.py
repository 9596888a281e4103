"""Cross-instance wake-ups: every status change, input and answer publishes an event
``"KIND TASK_ID"`` on the namespace's channel (from inside the Lua script that made the
change); each started store listens and wakes the local waiters of that task."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import anyio
from redis.exceptions import RedisError

from ...store import TaskWatch
from ..background import aclose_quietly
from .codec import text

log = logging.getLogger(__name__.rpartition(".")[0])


class TaskWatchHandle(TaskWatch):
    """A subscription to one task's change events (see ``RedisTaskStore.watch``).

    Enter it before reading the task, then ``await wait(timeout)``: returns True as
    soon as a change event for the task arrived since the last wait (from any
    instance), False after ``timeout`` (the fallback poll when a message was missed)."""

    def __init__(self, events: Events, task_id: str) -> None:
        self._events = events
        self.task_id = task_id
        self._event = anyio.Event()
        self._fired = False

    def fire(self) -> None:
        self._fired = True
        self._event.set()

    async def wait(self, timeout: float) -> bool:
        if not self._fired:
            with anyio.move_on_after(timeout):
                await self._event.wait()
        fired, self._fired = self._fired, False
        if self._event.is_set():
            self._event = anyio.Event()
        return fired

    def __enter__(self) -> TaskWatchHandle:
        self._events.watchers.setdefault(self.task_id, set()).add(self)
        return self

    def __exit__(self, *exc: object) -> None:
        ws = self._events.watchers.get(self.task_id)
        if ws is not None:
            ws.discard(self)
            if not ws:
                del self._events.watchers[self.task_id]


class Events:
    """The local waiters, and the listener that wakes them."""

    def __init__(self, client: Any, channel: str) -> None:
        self.redis: Any = client
        self.channel = channel
        self.watchers: dict[str, set[TaskWatchHandle]] = {}
        #: Called each time the listener (re)subscribes: Redis may have lost data meanwhile.
        self.on_subscribed: list[Callable[[], None]] = []

    def watch(self, task_id: str) -> TaskWatchHandle:
        return TaskWatchHandle(self, task_id)

    def dispatch(self, data: str) -> None:
        _, _, task_id = data.partition(" ")
        for w in list(self.watchers.get(task_id, ())):
            w.fire()

    def fire_all(self) -> None:
        for ws in list(self.watchers.values()):
            for w in list(ws):
                w.fire()

    async def listen(self) -> None:
        """Subscribe to the change channel; reconnect with backoff (waiters re-read meanwhile)."""
        delay = 0.05
        while True:
            pubsub = self.redis.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(self.channel)
                delay = 0.05
                for hook in self.on_subscribed:
                    hook()
                self.fire_all()  # anything may have changed while we were not listening
                while True:
                    msg = await pubsub.get_message(timeout=5.0)
                    if msg is not None and msg.get("type") == "message":
                        self.dispatch(text(msg["data"]))
            except (RedisError, OSError) as exc:
                log.debug("redis listener: %s: %s", type(exc).__name__, exc)
            finally:
                await aclose_quietly(pubsub)
            self.fire_all()
            await anyio.sleep(delay)
            delay = min(delay * 2, 2.0)
