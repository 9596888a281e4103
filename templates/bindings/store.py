"""The abstract ``TaskStore``: what the runtime needs from a place that keeps tasks.

Implementations: ``runtime.memory.InMemoryTaskStore``, ``runtime.sqlite.SqliteTaskStore``
(plain ``TaskStore``s) and ``runtime.redis.RedisTaskStore`` (a ``SharedTaskStore``: many
processes use it at once). Users subclass one of them for their own backend and run the
store-conformance suite ``mcp_tasks.testing.store_conformance`` against it.

Hand-written and copied verbatim: the model classes come from the generated modules.
"""

from __future__ import annotations

import abc
import json
import re
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict, Unpack

import anyio

from .errors import InvalidParams
from .lifecycle import SOURCES
from .protocol import INPUT_REQUIRED, REVISION, WORKING, TaskStatus

_SECONDS: dict[int, str] = {}
#: the latest times ``rfc3339`` formatted, whole
_STAMPS: dict[float, str] = {}
#: A lone surrogate: JSON can carry one (``"\\ud800"``), UTF-8 cannot (a valid pair is one
#: code point in a ``str``, so every surrogate in a ``str`` is a lone one).
_SURROGATE = re.compile("[\ud800-\udfff]")


class UnstorableValue(InvalidParams):
    """A value no store can encode (not JSON: NaN, a float infinity, an object JSON has no
    form for). Raised before anything is written. Given by a requestor (an input answer)
    it is invalid params (-32602); as a task's outcome the engine ends the task ``failed``
    saying why (``reason``), instead of trying the store again."""

    def __init__(self, reason: str) -> None:
        super().__init__(detail=reason)
        self.reason = reason


def encode_json(value: Any) -> str | None:
    """The one JSON encoding of stored results, errors and input hand-overs (every store
    that encodes uses it): compact, UTF-8 kept as is, except that text with a lone surrogate
    is stored escaped (``\\ud800``, which decodes to the same text); NaN/Infinity and
    objects that are not JSON raise ``UnstorableValue``."""
    if value is None:
        return None
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise UnstorableValue(f"it is not JSON ({exc})") from None
    if not text.isascii() and _SURROGATE.search(text) is not None:
        text = json.dumps(value, separators=(",", ":"), allow_nan=False)  # escaped
    return text


def storable_text(text: str | None) -> str | None:
    """``text`` as a store can keep it in UTF-8: each lone surrogate replaced by U+FFFD
    (status messages are for people; results and errors are escaped instead, exactly)."""
    if text is None or text.isascii():
        return text
    return _SURROGATE.sub("\ufffd", text)


def storable_id(task_id: str) -> bool:
    """Whether ``task_id`` can be a stored task's ID (UTF-8 can carry it). IDs are made by
    the engine (URL-safe ASCII), so one that cannot is unknown: stores answer it without
    asking their backend, and the engine answers it "not found" without asking the store."""
    return task_id.isascii() or _SURROGATE.search(task_id) is None


class Change(TypedDict, total=False):
    """What ``TaskStore.transition`` takes besides the status, as keyword arguments (see
    the ``TaskStore`` contract): ``expected`` statuses (None: the lifecycle's sources),
    the new ``status_message`` (None clears it), ``result``/``error`` (None keeps them)."""

    expected: Collection[TaskStatus] | None
    status_message: str | None
    result: dict[str, Any] | None
    error: dict[str, Any] | None


def allowed_sources(
    status: TaskStatus, expected: Collection[TaskStatus] | None
) -> Collection[TaskStatus]:
    """The head of every ``transition``: the statuses a task may be in for the move to
    ``status`` to happen (``expected``, else the lifecycle's sources, R-STATE-2)."""
    return SOURCES[status] if expected is None else expected


def source_values(status: TaskStatus, expected: Collection[TaskStatus] | None) -> list[str]:
    """``allowed_sources`` as stored values, for stores that compare in SQL or Lua."""
    return [s.value for s in allowed_sources(status, expected)]


def transition_sources(
    task_id: str, status: TaskStatus, expected: Collection[TaskStatus] | None
) -> list[str]:
    """``source_values`` for a transition of ``task_id``, for stores that compare in SQL or
    Lua: none (nothing to move) when the ID cannot be stored (``storable_id``)."""
    if not storable_id(task_id):
        return []
    return source_values(status, expected)


def rfc3339(ts: float) -> str:
    """RFC 3339 UTC with milliseconds, e.g. ``2025-11-25T10:30:00.000Z`` (R-TTL-1).

    Hot on every ``tasks/get`` and ``tasks/list``: the latest times asked for are answered
    from a small bounded dict (a polled task's times are asked for again and again), the
    date-time part of the others formatted once per second (another), the milliseconds
    appended.
    """
    stamp = _STAMPS.get(ts)
    if stamp is not None:
        return stamp
    ms = int(ts * 1000)
    sec, milli = divmod(ms, 1000)
    prefix = _SECONDS.get(sec)
    if prefix is None:
        if len(_SECONDS) >= 4096:
            _SECONDS.clear()
        prefix = _SECONDS[sec] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec))
    stamp = f"{prefix}.{milli:03d}Z"
    if len(_STAMPS) >= 512:
        _STAMPS.clear()
    _STAMPS[ts] = stamp
    return stamp


@dataclass(slots=True)
class TaskRecord:
    """One task as a store keeps it, in no wire format (each face renders it). Times are
    POSIX seconds; ``ttl_ms`` None means unlimited."""

    task_id: str
    requestor: str
    method: str
    status: TaskStatus
    created_at: float
    last_updated_at: float
    ttl_ms: int | None
    poll_interval_ms: int | None = None
    status_message: str | None = None
    #: The success result (a JSON object) of a completed task, or of a tool call that failed with isError.
    result: dict[str, Any] | None = None
    #: The JSON-RPC error object of a task whose work raised (R-RESULT-1).
    error: dict[str, Any] | None = None
    #: Bumped on every change; a store may use it for compare-and-set.
    version: int = 0
    #: The protocol face (revision) that created the task; only that face serves it.
    face: str = REVISION
    #: The tool a ``tools/call`` task runs (None for other tasks, and for tasks stored
    #: before stores kept it): for operators (metrics, ``mcptask admin``, the dashboard).
    tool: str | None = None

    @property
    def expires_at(self) -> float | None:
        return None if self.ttl_ms is None else self.created_at + self.ttl_ms / 1000.0


@dataclass(frozen=True, slots=True)
class TaskQuery:
    """What an operator's listing (``TaskStore.list_all``) keeps, across requestors: every
    field given must match (None: any). ``created_after`` keeps tasks created at or after
    it, ``created_before`` those created strictly before it (POSIX seconds: an age)."""

    statuses: frozenset[TaskStatus] | None = None
    requestor: str | None = None
    tool: str | None = None
    created_after: float | None = None
    created_before: float | None = None

    def matches(self, rec: TaskRecord) -> bool:
        """Whether ``rec`` is kept (the filters a store did not apply itself)."""
        return (
            (self.statuses is None or rec.status in self.statuses)
            and (self.requestor is None or rec.requestor == self.requestor)
            and (self.tool is None or rec.tool == self.tool)
            and (self.created_after is None or rec.created_at >= self.created_after)
            and (self.created_before is None or rec.created_at < self.created_before)
        )

    def start(self, before: tuple[float, str] | None) -> tuple[float, str] | None:
        """Where a newest-first walk starts: strictly before ``before`` and before
        ``created_before`` (``(t, "")`` sorts before every task created at ``t``)."""
        if self.created_before is None:
            return before
        edge = (self.created_before, "")
        return edge if before is None else min(before, edge)


@dataclass(slots=True)
class TaskPage:
    """One page of ``TaskStore.list_all``: ``tasks`` newest first, and ``next``, the key to
    pass as ``before`` for the next page (None: nothing older is left to look at). A page
    may hold fewer than ``limit`` tasks, even none, with ``next`` set: the store bounds
    how much it reads per call."""

    tasks: list[TaskRecord]
    next: tuple[float, str] | None


class TaskWatch:
    """A subscription to one task's change events (``SharedTaskStore.watch``).

    This default never fires: ``wait`` sleeps ``timeout`` and returns False, so the
    caller polls. Shared stores return one that wakes as soon as any instance
    changes the task (True), with ``timeout`` as the bounded fallback poll."""

    def __enter__(self) -> TaskWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    async def wait(self, timeout: float) -> bool:
        await anyio.sleep(timeout)
        return False


class TaskStore(abc.ABC):
    """Where tasks live. Every method is safe to call concurrently from one event loop.

    Contract (checked by the store-conformance suite, ``mcp_tasks.testing.store_conformance``):

    - ``create`` adds a record whose ``task_id`` is new; a duplicate id raises ``KeyError``.
    - ``get_own(task_id, requestor)`` is ``get`` for a caller that knows whose task it must
      be (the engine's lookups): the record when it is ``requestor``'s; for another
      requestor's task a store may answer None or the record (the engine answers both as an
      unknown task, R-SEC-1). A store that finds a task by its requestor faster overrides it
      (Redis: one read in the requestor's slot instead of the ID's pointer first).
    - ``get`` returns the record or None (unknown or deleted). A record past its
      ``expires_at`` may still be returned until it is swept: callers compare
      ``expires_at`` with their clock (the engine then answers "Task has expired").
      Records handed out must be treated as read-only.
    - ``transition`` is the one way statuses change: atomically, only when the
      current status is one of ``allowed_sources(status, expected)`` (by default every
      status allowed to move to ``status``, R-STATE-2), it writes the new status and
      ``status_message`` (None clears it), writes ``result``/``error`` when given
      (None keeps the stored one), bumps ``version``, sets ``last_updated_at`` to
      ``max(now, last_updated_at)``, and returns the new record; otherwise it
      changes nothing and returns None (a late completion after a cancel is a
      no-op, never an exception: R-CANCEL-3). ``expected`` may contain ``status``
      itself: that updates the status message without a move.
    - ``list_tasks`` returns one requestor's records ordered by ``(created_at,
      task_id)``, strictly after ``after`` when given (keyset paging); with ``face``, only
      the records of that face, up to ``limit`` of them (the filter is the query's).
    - ``delete`` removes a record and its result.
    - ``pop_expired`` removes and returns up to ``limit`` records whose
      ``expires_at`` <= ``now``; its cost grows with what it removes, not with
      the number of tasks kept.
    - ``count_active`` counts one requestor's non-terminal records.
    - ``create_limited(record, max_active)`` is ``create`` when the requestor has fewer
      than ``max_active`` non-terminal records, else it writes nothing and returns False
      (R-SEC-4). The engine creates every task through it. The default counts, then
      creates (two calls; the engine reserves room for its creations in flight meanwhile);
      a store that overrides it must count and write in one atomic step (concurrent calls
      never together overshoot ``max_active``).
    - ``recover`` (durable stores) marks records left non-terminal by a dead
      process failed with ``message`` as statusMessage and a stored
      ``errors.InternalError(message=message).to_error()``, and returns them.
    - ``tool`` is kept as given (None included), and returned by ``get``, ``transition``
      and the listings.
    - ``list_all(query, before=..., limit=...)`` (operators: ``mcptask admin``, the
      dashboard) lists every requestor's tasks that ``query`` keeps, newest first by
      ``(created_at, task_id)``, strictly before ``before``, as a ``TaskPage``. Never on a
      request's path: the engine does not call it. The default raises
      ``NotImplementedError`` (a store that cannot list across requestors).
    - ``set_ttl(task_id, ttl_ms)`` gives a non-terminal task a new ttl (milliseconds from
      its creation): its ``expires_at`` moves, and ``pop_expired`` goes by the new one;
      nothing else changes but ``version``. It returns the new record, or None for an
      unknown or terminal task (its ttl stays: a renewal racing a cancel changes nothing). The engine renews the ttl of a task whose work still runs (``EngineConfig.
      keep_running_tasks``); a store without it (the default raises
      ``NotImplementedError``) lets such tasks expire under their work.
    - Text UTF-8 cannot carry (a lone surrogate, which JSON can) is never a failure: a
      status message keeps U+FFFD in its place (``storable_text``), results, errors and
      input hand-overs are stored escaped and read back as they were (``encode_json``),
      and a task ID with one is unknown (``storable_id``: None, False, nothing written).
      A value that is not JSON at all raises ``UnstorableValue`` before anything is
      written.

    Failures: a store that cannot reach its backend raises ``errors.StoreUnavailable``
    (a plain, client-safe message; details go to the log) or lets the backend's own
    exception through: the engine answers either as "Task store unavailable". A store
    never builds a JSON-RPC error payload itself. Such a failure is transient to the
    engine: an outcome the store did not take is kept and written again
    (``EngineConfig.outcome_retry_s``), a task's status is never changed to say so.
    """

    #: True for a ``SharedTaskStore`` (kept as a class attribute for old subclasses).
    shared: bool = False
    #: True when the calls of concurrent tasks share round trips (Redis auto-pipelining,
    #: SQLite group commit): the engine then sends the deletes a creation's retention makes
    #: beside the creation instead of after it.
    batches: bool = False
    #: True when a process without an engine may change its tasks (``mcptask admin cancel``
    #: on the same SQLite file): the engine's sweep then reads back the tasks whose work
    #: runs here and stops the work of those that ended in the store.
    external_changes: bool = False

    @abc.abstractmethod
    async def create(self, record: TaskRecord) -> None: ...

    @abc.abstractmethod
    async def get(self, task_id: str) -> TaskRecord | None: ...

    async def get_own(self, task_id: str, requestor: str) -> TaskRecord | None:
        """``get`` when the task should be ``requestor``'s (see the contract); the default
        is ``get``."""
        return await self.get(task_id)

    @abc.abstractmethod
    async def transition(
        self, task_id: str, status: TaskStatus, *, now: float, **change: Unpack[Change]
    ) -> TaskRecord | None: ...

    @abc.abstractmethod
    async def list_tasks(
        self,
        requestor: str,
        *,
        after: tuple[float, str] | None,
        limit: int,
        face: str | None = None,
    ) -> list[TaskRecord]:
        """Up to ``limit`` of ``requestor``'s tasks after ``after`` in (created_at, task_id)
        order; with ``face``, only that face's tasks (skipped in the query, so a page of one
        face is full whatever the other faces hold). A store may leave ``result`` and
        ``error`` out of these records (None): a listing shows tasks, not what they
        returned."""

    @abc.abstractmethod
    async def delete(self, task_id: str) -> bool: ...

    @abc.abstractmethod
    async def pop_expired(self, now: float, limit: int) -> list[TaskRecord]: ...

    @abc.abstractmethod
    async def count_active(self, requestor: str) -> int: ...

    async def create_limited(self, record: TaskRecord, max_active: int) -> bool:
        """``create`` unless the requestor has ``max_active`` non-terminal tasks or more:
        then nothing is written and the answer is False (R-SEC-4)."""
        if await self.count_active(record.requestor) >= max_active:
            return False
        await self.create(record)
        return True

    async def recover(self, now: float, message: str) -> list[TaskRecord]:
        """Mark tasks interrupted by a dead process failed. Non-durable stores have none."""
        return []

    async def list_all(
        self, query: TaskQuery, *, before: tuple[float, str] | None, limit: int
    ) -> TaskPage:
        """Every requestor's tasks that ``query`` keeps, newest first, strictly before
        ``before`` (see the contract). A store may leave ``result`` and ``error`` out."""
        raise NotImplementedError(f"{type(self).__name__} cannot list tasks across requestors")

    async def set_ttl(self, task_id: str, ttl_ms: int) -> TaskRecord | None:
        """A new ttl (ms from creation) for a task; the new record, None if unknown (see
        the contract). The default cannot: a store without it keeps ttls as created."""
        raise NotImplementedError(f"{type(self).__name__} cannot change a task's ttl")

    async def close(self) -> None:
        """Release resources. The default does nothing."""
        return None

    async def start(self, tg: Any) -> None:
        """Start background work (change listener, heartbeat) in the engine's anyio task
        group ``tg``; it stops when the engine stops. The default starts nothing."""
        return None

    @staticmethod
    def sources(status: TaskStatus) -> frozenset[TaskStatus]:
        """The statuses allowed to move to ``status`` (R-STATE-2)."""
        return SOURCES[status]


class SharedTaskStore(TaskStore):
    """A store several engines in several processes use at once (e.g.
    ``runtime.redis.RedisTaskStore``).

    On top of ``TaskStore`` it provides change events (``watch``), a ``recover`` that only
    touches tasks of instances whose lease expired (the engine calls it on every sweep),
    a ``shared_secret`` that signs ``tasks/list`` cursors alike on every instance, and
    the input hand-over below, so an input request made by work on one instance is
    delivered by a ``tasks/result`` held on another and the answer reaches the work.
    ``item`` is ``{"id", "method", "params", "seq"}`` (``seq``: creation order within the
    task); an answer is ``{"result": {...}}`` or
    ``{"error": {...}}``.

    Three steps pair an input hand-over with the status it implies, so that a task is never
    ``working`` while an input request is outstanding: ``offer_input`` (queue a request,
    ``working`` -> ``input_required``), ``answer_inputs`` (answer, and ``input_required`` ->
    ``working`` when none is left outstanding) and ``resume`` (the work stopped waiting:
    ``input_required`` -> ``working`` when none is outstanding). Their defaults make several
    calls; a store makes each one atomic step (``RedisTaskStore``: one script each).
    """

    shared: bool = True

    @abc.abstractmethod
    async def shared_secret(self) -> bytes | None:
        """A secret every engine using this store reads alike (it signs ``tasks/list``
        cursors when ``EngineConfig.cursor_secret`` is not set). The engine asks for it
        every time it signs or verifies: cache it, and read it again after a reconnect."""

    @abc.abstractmethod
    def watch(self, task_id: str) -> TaskWatch:
        """Change events for one task, as a context manager: enter it before reading the
        task, then ``await w.wait(timeout)`` (True: the task changed on some instance)."""

    @abc.abstractmethod
    async def put_input(self, task_id: str, requestor: str, item: dict[str, Any]) -> bool:
        """Queue an input request of a running task for any ``tasks/result``."""

    @abc.abstractmethod
    async def pending_inputs(self, task_id: str, requestor: str) -> list[dict[str, Any]]:
        """Every outstanding input request (claimed or not), oldest first. An answered one
        is gone from the next call on any instance (``answer_input`` removes it at once)."""

    @abc.abstractmethod
    async def claim_inputs(
        self, task_id: str, requestor: str, claimer: str, lease_s: float
    ) -> list[dict[str, Any]]:
        """Input requests not being delivered (or already claimed by ``claimer``: that
        renews the claim), claimed for ``lease_s`` seconds."""

    @abc.abstractmethod
    async def release_input(
        self, task_id: str, requestor: str, input_id: str, claimer: str
    ) -> None:
        """Give up a claim (the ``tasks/result`` call went away); another may deliver it."""

    @abc.abstractmethod
    async def answer_input(
        self, task_id: str, requestor: str, input_id: str, answer: dict[str, Any]
    ) -> bool:
        """Store the answer for the work and, in the same atomic step, remove the input from
        the outstanding ones (``pending_inputs``); False when it is unknown or answered."""

    @abc.abstractmethod
    async def take_answer(
        self, task_id: str, requestor: str, input_id: str
    ) -> dict[str, Any] | None:
        """The answer to an input request, once (None while unanswered)."""

    @abc.abstractmethod
    async def withdraw_input(self, task_id: str, requestor: str, input_id: str) -> None:
        """Forget an input request (its work stopped waiting)."""

    async def offer_input(
        self,
        task_id: str,
        requestor: str,
        item: dict[str, Any],
        *,
        now: float,
        status_message: str | None,
    ) -> TaskRecord | None:
        """``put_input``, and a ``working`` task moved to ``input_required`` with
        ``status_message`` (as ``transition`` moves it): the new record when it moved, else
        None (it waited for input already, or it is gone)."""
        if not await self.put_input(task_id, requestor, item):
            return None
        return await self.transition(
            task_id, INPUT_REQUIRED, now=now, expected=(WORKING,), status_message=status_message
        )

    async def answer_inputs(
        self, task_id: str, requestor: str, answers: Mapping[str, dict[str, Any]], *, now: float
    ) -> tuple[set[str], TaskRecord | None]:
        """``answer_input`` for every input id of ``answers`` still outstanding (the others
        change nothing) and, when that left none outstanding, the task moved from
        ``input_required`` to ``working`` (its status message cleared): the ids taken, and
        the new record when it moved."""
        taken = {k for k, a in answers.items() if await self.answer_input(task_id, requestor, k, a)}
        if not taken:
            return taken, None
        return taken, await self.resume(task_id, requestor, now=now)

    async def resume(self, task_id: str, requestor: str, *, now: float) -> TaskRecord | None:
        """The task moved from ``input_required`` to ``working`` (its status message cleared)
        unless an input request is outstanding: the new record when it moved, else None."""
        if await self.pending_inputs(task_id, requestor):
            return None
        return await self.transition(task_id, WORKING, now=now, expected=(INPUT_REQUIRED,))
