"""The engine's limits (R-SEC-3, R-SEC-4): the rate limit (task creation included), the
count of active tasks per requestor (with reservations for creations in flight), what one
requestor keeps (tasks and result bytes, :class:`Retention`), the size of one result, and
the ttl policy (R-TTL-2)."""

from __future__ import annotations

import enum
import json
import time
from typing import Any

import pydantic_core

from ..errors import (
    ConcurrencyLimitExceeded,
    RateLimitExceeded,
    ResultTooLarge,
    RetentionLimitExceeded,
)
from .audit import audit
from .config import EngineConfig


class RateLimiter:
    """R-SEC-3: a fixed-window counter of ``tasks/*`` calls per requestor."""

    __slots__ = ("_counts", "calls", "window_s")

    def __init__(self, calls: int, window_s: float) -> None:
        self.calls = calls
        self.window_s = window_s
        self._counts: dict[str, tuple[float, int]] = {}

    def check(self, requestor: str) -> None:
        """Count one call; raise ``RateLimitExceeded`` past the limit."""
        now = time.monotonic()
        start, count = self._counts.get(requestor, (now, 0))
        if now - start >= self.window_s:
            start, count = now, 0
        count += 1
        self._counts[requestor] = (start, count)
        if count > self.calls:
            audit("rate_limited", requestor, None)
            raise RateLimitExceeded(self.calls, self.window_s)

    def prune(self) -> None:
        """Forget finished windows once many requestors were seen (called by the sweeper)."""
        if len(self._counts) > 1024:
            now = time.monotonic()
            window = self.window_s
            self._counts = {k: v for k, v in self._counts.items() if now - v[0] < window}


class ActiveLimit:
    """R-SEC-4: at most ``limit`` non-terminal tasks per requestor.

    The store counts the active tasks as it creates one (``TaskStore.create_limited``).
    When its count and write are two steps (the default), creations in flight hold a
    reservation (``acquire`` ... ``release`` in a ``finally``) and the store gets the
    ``room`` left by the others, so concurrent creations of one requestor cannot overshoot
    the limit."""

    __slots__ = ("_reserved", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._reserved: dict[str, int] = {}

    def acquire(self, requestor: str) -> None:
        """Hold one slot for a creation in flight."""
        self._reserved[requestor] = self._reserved.get(requestor, 0) + 1

    def room(self, requestor: str) -> int:
        """How many active tasks the store may hold for one more to be created: the limit
        less the other creations in flight."""
        return self.limit - self._reserved[requestor] + 1

    def refuse(self, requestor: str) -> None:
        """Raise ``ConcurrencyLimitExceeded`` (the store had no room)."""
        audit("create_rejected", requestor, None, reason="concurrency_limit")
        raise ConcurrencyLimitExceeded(self.limit)

    def release(self, requestor: str) -> None:
        """The creation ended (created or refused)."""
        left = self._reserved[requestor] - 1
        if left:
            self._reserved[requestor] = left
        else:
            del self._reserved[requestor]


def json_size(value: Any) -> int:
    """Bytes of ``value`` as JSON (a string that is not valid Unicode, e.g. a lone
    surrogate, counted as its ``\\uXXXX`` escape)."""
    if value is None:
        return 0
    try:
        return len(pydantic_core.to_json(value))
    except pydantic_core.PydanticSerializationError:
        return len(json.dumps(value, separators=(",", ":")))


def outcome_size(result: dict[str, Any] | None, error: dict[str, Any] | None) -> int:
    """Bytes an outcome keeps: its result and error as JSON (what the byte caps count)."""
    return json_size(result) + json_size(error)


def bounded_outcome(
    result: dict[str, Any] | None, error: dict[str, Any] | None, limit: int
) -> tuple[int, ResultTooLarge | None]:
    """(bytes the outcome keeps, the ``ResultTooLarge`` to keep instead when its result or
    error is over ``limit`` bytes)."""
    size = outcome_size(result, error)
    if size <= limit:
        return size, None
    return size, ResultTooLarge(size, limit)


class Retention:
    """R-SEC-4: what one requestor keeps in this engine, at most ``max_tasks`` tasks and
    ``max_bytes`` bytes of results (and errors). Tasks are noted as they are created and
    as they end, with their result's size; when a requestor is over either cap its oldest
    finished tasks are the ones to drop (the engine deletes them, as if their ttl ended).

    A creation that would go over ``max_tasks`` when none of the requestor's tasks has
    finished is refused (``RetentionLimitExceeded``). The counts are this engine's: with
    a shared store, each instance bounds the tasks created through it."""

    __slots__ = ("_bytes", "_kept", "max_bytes", "max_tasks")

    #: the size noted for a task that has not ended
    ACTIVE = -1

    def __init__(self, max_tasks: int, max_bytes: int) -> None:
        self.max_tasks = max_tasks
        self.max_bytes = max_bytes
        #: requestor -> task id -> result bytes (``ACTIVE`` while running), oldest first
        self._kept: dict[str, dict[str, int]] = {}
        self._bytes: dict[str, int] = {}

    def kept(self, requestor: str) -> tuple[int, int]:
        """(tasks, result bytes) kept for ``requestor``."""
        return len(self._kept.get(requestor, ())), self._bytes.get(requestor, 0)

    def admit(self, requestor: str, task_id: str) -> list[str]:
        """Note a new task; the finished tasks to drop for it to fit (oldest first).
        Raises ``RetentionLimitExceeded`` (nothing noted) when none can be dropped."""
        kept = self._kept.setdefault(requestor, {})
        excess = len(kept) + 1 - self.max_tasks
        drop: list[str] = []
        if excess > 0:
            for tid, size in kept.items():
                if size != self.ACTIVE:
                    drop.append(tid)
                    if len(drop) == excess:
                        break
            if len(drop) < excess:
                if not kept:
                    del self._kept[requestor]
                raise RetentionLimitExceeded(self.max_tasks)
        kept[task_id] = self.ACTIVE
        for tid in drop:
            self.forget(requestor, tid)
        return drop

    def finished(self, requestor: str, task_id: str, size: int) -> list[str]:
        """Note that a task ended keeping ``size`` bytes; the finished tasks to drop
        (oldest first) to bring the requestor back under ``max_bytes``."""
        kept = self._kept.get(requestor)
        if kept is None or kept.get(task_id) != self.ACTIVE:
            return []
        kept[task_id] = size
        total = self._bytes[requestor] = self._bytes.get(requestor, 0) + size
        drop: list[str] = []
        if total > self.max_bytes:
            for tid, tsize in kept.items():
                if total <= self.max_bytes:
                    break
                if tsize > 0 and tid != task_id:
                    drop.append(tid)
                    total -= tsize
        for tid in drop:
            self.forget(requestor, tid)
        return drop

    def forget(self, requestor: str, task_id: str) -> None:
        """The task is gone (expired, deleted or dropped)."""
        kept = self._kept.get(requestor)
        if kept is None:
            return
        size = kept.pop(task_id, self.ACTIVE)
        if size > 0:
            left = self._bytes[requestor] - size
            if left:
                self._bytes[requestor] = left
            else:
                del self._bytes[requestor]
        if not kept:
            del self._kept[requestor]
            self._bytes.pop(requestor, None)


class Default(enum.Enum):
    """The type of ``DEFAULT``: no ttl asked for."""

    DEFAULT = "default"


#: A ttl nobody asked for: the server's default applies.
DEFAULT = Default.DEFAULT


def ttl_policy(config: EngineConfig, requested: int | None | Default) -> int | None:
    """The actual ttl (R-TTL-2) of a non-negative ``requested`` one (faces read and check
    it): the default when ``DEFAULT``, clamped to the maximum; ``None`` (unlimited) only
    with ``allow_unlimited_ttl``, else the maximum."""
    if requested is DEFAULT:
        return config.default_ttl_ms
    if requested is None:
        return None if config.allow_unlimited_ttl else config.max_ttl_ms
    # Clamped before any arithmetic: 10**15 never reaches a timer or a date (R-SEC-4).
    return min(requested, config.max_ttl_ms)
