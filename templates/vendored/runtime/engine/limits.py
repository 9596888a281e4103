"""The engine's limits (R-SEC-3, R-SEC-4): the rate limit (task creation included), the
count of active tasks per requestor (with reservations for creations in flight), what is
kept per requestor (or client address) and in all (tasks and bytes, :class:`Retention`), the
size of one result, and the ttl policy (R-TTL-2)."""

from __future__ import annotations

import contextvars
import enum
import json
import sys
import time
from collections import OrderedDict
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from typing import Any

import pydantic_core

from ...errors import (
    ConcurrencyLimitExceeded,
    RateLimitExceeded,
    ResultTooLarge,
    RetentionLimitExceeded,
)
from .audit import audit
from .config import EngineConfig

#: Set while the server reads tasks as its own work, which no requestor's rate limit counts:
#: the reads of a ``subscriptions/listen`` (its request was counted as it arrived).
_UNMETERED: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "mcp_tasks_unmetered", default=False
)


@contextmanager
def unmetered() -> Iterator[None]:
    """The task reads made inside are the server's own work: :meth:`RateLimiter.check`
    counts none of them."""
    token = _UNMETERED.set(True)
    try:
        yield
    finally:
        _UNMETERED.reset(token)


class RateLimiter:
    """R-SEC-3: a fixed-window counter of ``tasks/*`` calls per requestor."""

    __slots__ = ("_counts", "calls", "window_s")

    def __init__(self, calls: int, window_s: float) -> None:
        self.calls = calls
        self.window_s = window_s
        self._counts: dict[str, tuple[float, int]] = {}

    def check(self, requestor: str, calls: int = 1) -> None:
        """Count ``calls`` calls (none inside :func:`unmetered`); raise
        ``RateLimitExceeded`` past the limit."""
        if _UNMETERED.get():
            return
        now = time.monotonic()
        start, count = self._counts.get(requestor, (now, 0))
        if now - start >= self.window_s:
            start, count = now, 0
        count += calls
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


def outcome_size(
    result: dict[str, Any] | None, error: dict[str, Any] | None, message: str | None = None
) -> int:
    """Bytes an outcome keeps: its result and error as JSON and its statusMessage as UTF-8
    (what the byte caps count)."""
    size = json_size(result) + json_size(error)
    if message:
        size += len(message) if message.isascii() else len(message.encode("utf-8", "replace"))
    return size


def bounded_outcome(
    result: dict[str, Any] | None,
    error: dict[str, Any] | None,
    limit: int,
    message: str | None = None,
) -> tuple[int, ResultTooLarge | None]:
    """(bytes the outcome keeps, its ``message`` included; the ``ResultTooLarge`` to keep
    instead when its result or error is over ``limit`` bytes)."""
    size = outcome_size(result, error)
    if size > limit:
        return size, ResultTooLarge(size, limit)
    return size + outcome_size(None, None, message), None


class _Kept:
    """One task :class:`Retention` counts: its owner, the budget it counts against, the
    bytes it keeps and whether it has finished."""

    __slots__ = ("budget", "done", "owner", "size")

    def __init__(self, owner: str, budget: str, size: int) -> None:
        self.owner = owner
        self.budget = budget
        self.size = size
        self.done = False


class _Budget:
    """What one budget (a requestor, or a client address) keeps: tasks, bytes, and its
    finished tasks, first finished first (an ``OrderedDict``: its first entries are found in
    O(1) however many were deleted before them, unlike a ``dict``'s)."""

    __slots__ = ("bytes", "finished", "tasks")

    def __init__(self) -> None:
        self.tasks = 0
        self.bytes = 0
        self.finished: OrderedDict[str, None] = OrderedDict()


class Retention:
    """R-SEC-4: what this engine keeps, bounded twice: per budget at most ``max_tasks``
    tasks and ``max_bytes`` bytes, and for all budgets together at most ``total_tasks``
    and ``total_bytes``. A budget is a requestor's own (a token's subject, stdio) or one
    its requestor shares (a client address's sessions and anonymous requests: the caller
    names it). The bytes are what a task holds: its arguments while it runs, its result,
    error and statusMessage once it has finished.

    Tasks are noted as they are created (``admit``) and as they end (``finished``); past a
    bound the oldest finished tasks are the ones to drop (the engine deletes them, as if
    their ttl ended): the budget's own first, then at the total bound those of any budget,
    first finished first. A creation that would go over a bound when no finished task can
    go is refused (``RetentionLimitExceeded``). The counts are this engine's: with a shared
    store, each instance bounds the tasks created through it."""

    __slots__ = (
        "_budgets", "_finished", "_tasks", "bytes", "max_bytes", "max_tasks", "total_bytes",
        "total_tasks",
    )  # fmt: skip

    def __init__(
        self,
        max_tasks: int,
        max_bytes: int,
        total_tasks: int | None = None,
        total_bytes: int | None = None,
    ) -> None:
        self.max_tasks = max_tasks
        self.max_bytes = max_bytes
        #: None: no bound in all
        self.total_tasks = sys.maxsize if total_tasks is None else total_tasks
        self.total_bytes = sys.maxsize if total_bytes is None else total_bytes
        #: task id -> what it keeps
        self._tasks: dict[str, _Kept] = {}
        self._budgets: dict[str, _Budget] = {}
        #: every finished task, first finished first
        self._finished: OrderedDict[str, None] = OrderedDict()
        #: bytes kept in all
        self.bytes = 0

    def __len__(self) -> int:
        """Tasks kept in all."""
        return len(self._tasks)

    def kept(self, budget: str) -> tuple[int, int]:
        """(tasks, bytes) kept for ``budget``."""
        b = self._budgets.get(budget)
        return (b.tasks, b.bytes) if b is not None else (0, 0)

    def admit(
        self, requestor: str, task_id: str, size: int = 0, budget: str | None = None
    ) -> list[tuple[str, str]]:
        """Note a new task of ``requestor``, holding ``size`` bytes while it runs, counted
        against ``budget`` (the requestor's own when None); the finished tasks to drop for
        it to fit, as (owner, task id), oldest first. Raises ``RetentionLimitExceeded``
        (nothing noted, nothing dropped) when none can go."""
        key = requestor if budget is None else budget
        b = self._budgets.get(key)
        drop: list[str] = []
        tasks = (b.tasks if b is not None else 0) + 1 - self.max_tasks
        nbytes = (b.bytes if b is not None else 0) + size - self.max_bytes
        if tasks > 0 or nbytes > 0:
            if b is not None:
                tasks, nbytes = self._pick(b.finished, tasks, nbytes, drop, ())
            if tasks > 0 or nbytes > 0:
                raise self._refusal(f"{self.max_tasks}", f"{self.max_bytes} bytes", tasks)
        gone = sum(self._tasks[tid].size for tid in drop)
        tasks = len(self._tasks) - len(drop) + 1 - self.total_tasks
        nbytes = self.bytes - gone + size - self.total_bytes
        if tasks > 0 or nbytes > 0:
            tasks, nbytes = self._pick(self._finished, tasks, nbytes, drop, set(drop))
            if tasks > 0 or nbytes > 0:
                raise self._refusal(
                    f"{self.total_tasks} in all and {self.max_tasks}",
                    f"{self.total_bytes} bytes in all and {self.max_bytes} bytes",
                    tasks,
                )
        dropped = [(self._tasks[tid].owner, tid) for tid in drop]
        for tid in drop:
            self.forget(tid)
        b = self._budgets.get(key)  # (gone if every one of its tasks was dropped)
        if b is None:
            b = self._budgets[key] = _Budget()
        self._tasks[task_id] = _Kept(requestor, key, size)
        b.tasks += 1
        b.bytes += size
        self.bytes += size
        return dropped

    def _pick(
        self,
        finished: OrderedDict[str, None],
        tasks: int,
        nbytes: int,
        drop: list[str],
        skip: Collection[str],
    ) -> tuple[int, int]:
        """Add to ``drop`` the first of ``finished`` (not in ``skip``) until ``tasks`` more
        tasks and ``nbytes`` more bytes are freed; what is still to free."""
        for tid in finished:
            if tasks <= 0 and nbytes <= 0:
                break
            if tid in skip:
                continue
            size = self._tasks[tid].size
            if tasks <= 0 and size <= 0:
                continue  # frees no byte
            drop.append(tid)
            tasks -= 1
            nbytes -= size
        return tasks, nbytes

    @staticmethod
    def _refusal(count: str, size: str, tasks: int) -> RetentionLimitExceeded:
        """The refusal naming the bound still over: the count's when ``tasks`` are still to
        free, else the bytes' (the error's message template: "... at most {limit} per
        requestor, ...")."""
        return RetentionLimitExceeded(count if tasks > 0 else size)

    def finished(self, task_id: str, size: int) -> list[tuple[str, str]]:
        """Note that a task ended keeping ``size`` bytes (its arguments are let go); the
        finished tasks to drop, as (owner, task id), oldest first, to bring its budget and
        then the total back under their byte caps (never the task itself: over a cap with
        nothing else finished, it stays over until something ends)."""
        kept = self._tasks.get(task_id)
        if kept is None or kept.done:
            return []
        b = self._budgets[kept.budget]
        grown = size - kept.size
        kept.size, kept.done = size, True
        b.bytes += grown
        self.bytes += grown
        drop: list[str] = []
        skip = (task_id,)
        over = b.bytes - self.max_bytes
        if over > 0:
            self._pick(b.finished, 0, over, drop, skip)
        over = self.bytes - sum(self._tasks[tid].size for tid in drop) - self.total_bytes
        if over > 0:
            self._pick(self._finished, 0, over, drop, {task_id, *drop})
        b.finished[task_id] = None
        self._finished[task_id] = None
        dropped = [(self._tasks[tid].owner, tid) for tid in drop]
        for tid in drop:
            self.forget(tid)
        return dropped

    def forget(self, task_id: str) -> None:
        """The task is gone (expired, deleted or dropped)."""
        kept = self._tasks.pop(task_id, None)
        if kept is None:
            return
        b = self._budgets[kept.budget]
        b.tasks -= 1
        b.bytes -= kept.size
        self.bytes -= kept.size
        if kept.done:
            del b.finished[task_id]
            del self._finished[task_id]
        if b.tasks == 0:
            del self._budgets[kept.budget]


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
