"""Cross-instance wake-ups: every status change, input and answer publishes an event
``"KIND TASK_ID"`` on the namespace's channel (from inside the Lua script that made the
change); each started store listens and wakes the local waiters of that task."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import anyio
from redis.exceptions import RedisError

from ....store import TaskWatch
from ...background import aclose_quietly
from .codec import text
from .wire import Wire

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
        #: the listener's wait before it subscribes again (backoff while Redis is away)
        self._delay = 0.05
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

    def _subscribed(self) -> None:
        self._delay = 0.05  # subscribed: a later loss reconnects at once
        for hook in self.on_subscribed:
            hook()
        self.fire_all()  # anything may have changed while we were not listening

    async def listen(self) -> None:
        """Subscribe to the change channel; reconnect with backoff (waiters re-read meanwhile).

        On the store's own kind of connection (``wire.py``) when the client allows it: each
        message is dispatched as it is parsed, with no task or parser call of its own (every
        instance reads every instance's events); else through redis-py's ``PubSub``."""
        wire = Wire.of(self.redis)
        self._delay = 0.05
        while True:
            try:
                if wire is not None:
                    await wire.subscribe(self.channel, self.dispatch, self._subscribed)
                else:
                    await self._listen_redis_py()
            except (RedisError, OSError) as exc:
                log.debug("redis listener: %s: %s", type(exc).__name__, exc)
            self.fire_all()
            await anyio.sleep(self._delay)
            self._delay = min(self._delay * 2, 2.0)

    async def _listen_redis_py(self) -> None:
        pubsub = self.redis.pubsub(ignore_subscribe_messages=True)
        try:
            await pubsub.subscribe(self.channel)
            self._subscribed()
            while True:
                msg = await pubsub.get_message(timeout=5.0)
                if msg is not None and msg.get("type") == "message":
                    self.dispatch(text(msg["data"]))
        finally:
            await aclose_quietly(pubsub)
