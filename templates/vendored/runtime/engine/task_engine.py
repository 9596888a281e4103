"""``TaskEngine``: the transport-free, protocol-neutral receiver side of tasks.

The engine knows tasks, not wire formats, and builds no face: each face's handler
(``core.CoreTasks``, ``extension.ExtensionTasks``, or a user's subclass) translates and
calls this neutral API; ``requestor`` is the owner (R-SEC-1) and ``face`` the calling face's
name (the revision it speaks): a face only serves tasks it created, another face's task
answers exactly like an unknown one.

- ``start(requestor, face, method, work, *, ttl_ms=DEFAULT, tool_error, tool=None,
  budget=None, held_bytes=0)``: a new task, stored before it returns (R-CREATE-2), its work
  started; ``tool_error`` is the status a tool result with ``isError`` ends in (the core
  face: ``FAILED``); ``tool`` the tool a ``tools/call`` task runs (kept for operators);
  ``budget`` and ``held_bytes``: what it counts against among the tasks kept (R-SEC-4).
- ``record(requestor, task_id, *, face)``: the task (``TaskNotFound``/``TaskExpired``);
  ``holds(...)`` the same question answered yes or no, nothing counted or audited.
- ``view(requestor, task_id, *, face)``: ``TaskView(record, inputs)``, the outstanding
  input requests in creation order, each with a key unique for the task's life.
- ``answer(requestor, task_id, answers, *, face)``: hand answers (bare results, by key)
  to the work; keys not outstanding are ignored without reading their values; the keys
  taken are gone from the next ``view`` on any instance, and the task is back to
  ``working`` when none remain, before it returns (read-your-writes).
- ``cancel(requestor, task_id, *, face)``: ``(record, moved)``; the face decides
  between an ack and ``TaskAlreadyTerminal`` when ``moved`` is False.
- ``wait_terminal(requestor, task_id, deliver, *, face)``, ``list_page(requestor, cursor,
  *, face)``: the core face's blocking wait and paged list.

Everything that happens to tasks goes through one sink, ``engine.events`` (``events.py``):
status changes go to every listener of ``on_status`` (``engine.on_status.append(fn)``;
``fn(record)``), queued and sent after the change (a result never waits on one), which
renders them for the record's face. Operators' views observe ``on_created``, ``on_changed``
and ``on_expired`` (``fn(record)``, inline: keep them cheap); ``cancel_task`` cancels any.

The engine is a thin front: lookup and authorization, limits (rate limit, active tasks,
retention, ttl policy, tombstones: R-SEC-3, R-SEC-4, ``EngineConfig``), listing and
cancelling. The life of the work running here is the run supervisor's (``supervisor.py``),
built from narrow parts: the store writer (``store_writer.py``: the coordination chosen from
the store's type, its one ``StoreGuard``, the clock), the events sink and the config. Work
that runs elsewhere is a ``HandedWork`` (``executor.py``). Audit events: ``audit.py``.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from typing import Any

import anyio
import anyio.abc

from ... import protocol
from ...errors import (
    InternalError,
    InvalidCursor,
    RequestCancelled,
    StoreUnavailable,
    TaskError,
    TaskExpired,
    TaskNotFound,
)
from ...store import TaskRecord, TaskStore, storable_id
from ..background import close_group, open_group
from ..logs import logger
from ..stores.memory import InMemoryTaskStore
from .audit import audit
from .config import EngineConfig
from .coordination import Answers, Coordination, choose
from .cursor import CursorError
from .events import EngineEvents, RecordListener, StatusListener
from .executor import HandedWork
from .guard import StoreGuard
from .limits import DEFAULT, ActiveLimit, Default, RateLimiter, Retention, outcome_size, ttl_policy
from .runs import (
    INTERRUPTED_MESSAGE,
    InputHandler,
    InputRequest,
    IsErrorResult,
    PendingInput,
    TaskContext,
    TaskView,
    Work,
)
from .store_writer import StoreWriter
from .supervisor import RunSupervisor
from .tombstones import Tombstones
from .waiting import await_settled, await_terminal

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

log = logger("runtime")

#: the statusMessage of a task its requestor cancelled
CANCELLED_MESSAGE = "The task was cancelled by the requestor"

Dropped = list[tuple[str, str]]  #: (owner, task ID): what a creation drops (``Retention.admit``)
#: How many reads of ``page_size + 1`` records one ``tasks/list`` page makes at most, when
#: expired tasks no sweep removed yet take up the reads.
LIST_READS = 8


def cancel_change(message: str) -> dict[str, Any]:
    """The store change of a cancel (R-CANCEL-2), ``TaskStore.transition``'s arguments after
    the status ``CANCELLED``: only from a non-terminal status, ``message`` as statusMessage,
    the cancellation as the stored error (what ``tasks/result`` answers). Every cancel makes
    it: a requestor's, an operator's through the engine, ``mcptask admin cancel --store``."""
    return {
        "expected": protocol.NON_TERMINAL,
        "status_message": message,
        "error": cancelled_error(),
    }


def cancelled_error() -> dict[str, Any]:
    """The JSON-RPC error stored for a cancelled task: ``tasks/result`` answers it (R-RESULT-1)."""
    return RequestCancelled(detail="the task was cancelled").to_error()


class TaskEngine:
    """Tasks over a store: creation, background work, reading, answering, cancelling."""

    log = log

    def __init__(
        self,
        store: TaskStore | None = None,
        config: EngineConfig | None = None,
        *,
        on_status: StatusListener | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = cfg = config if config is not None else EngineConfig()
        #: what happens to tasks, to its subscribers (``events.py``)
        self.events = events = EngineEvents()
        if on_status is not None:
            events.on_status.append(on_status)
        events.on_ended.append(self.ended)
        self.clock = clock
        #: the store as the parts write it (its coordination is set with the store)
        self.writer = StoreWriter(clock)
        #: the life of the work running here (``supervisor.py``)
        self.runs = RunSupervisor(self.writer, events, cfg)
        self.store = store if store is not None else InMemoryTaskStore()
        self.rate = RateLimiter(cfg.rate_limit_calls, cfg.rate_limit_window_s)
        self.active_limit = ActiveLimit(cfg.max_active_per_requestor)
        # set by EngineConfig
        assert cfg.max_tasks_per_requestor is not None and cfg.max_tasks_total is not None
        assert cfg.max_result_bytes_total is not None
        caps = (cfg.max_tasks_per_requestor, cfg.max_result_bytes_per_requestor)
        self.retention = Retention(*caps, cfg.max_tasks_total, cfg.max_result_bytes_total)
        self.tombstones = Tombstones(
            cfg.expired_tombstones_per_requestor, cfg.tombstone_requestors, cfg.max_tombstones
        )
        self._tg: anyio.abc.TaskGroup | None = None

    @property
    def on_status(self) -> list[StatusListener]:
        """Called with the new record of every status change, in order, after it
        (R-NOTIFY-1)."""
        return self.events.on_status

    @property
    def on_created(self) -> list[RecordListener]:
        """Called inline with the record of every task this engine creates."""
        return self.events.on_created

    @property
    def on_expired(self) -> list[RecordListener]:
        """Called inline with the record of every task this engine expires."""
        return self.events.on_expired

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> TaskEngine:
        tg = await open_group()
        self._tg = tg
        try:
            await self.store.start(tg)
            tg.start_soon(self.events.send)
            now = self.clock()
            for rec in await self.coordination.recover_at_start(now, INTERRUPTED_MESSAGE):
                self.events.status(rec)
        except BaseException:
            self._tg = None
            await close_group(tg)
            raise
        tg.start_soon(self._sweeper)
        self.runs.open(tg)
        return self

    async def __aexit__(self, *exc: object) -> None:
        tg, self._tg = self._tg, None
        await close_group(tg)
        self.runs.close()

    @property
    def store(self) -> TaskStore:
        """The task store. Setting it chooses the coordination again (before ``start``)."""
        return self._store

    @store.setter
    def store(self, store: TaskStore) -> None:
        self._store = store
        #: A store's own ``create_limited`` counts and writes atomically; the default
        #: (count, then create) needs the reservations of the creations in flight.
        self._atomic_limit = type(store).create_limited is not TaskStore.create_limited
        #: local or shared, chosen from the store's type (``coordination.py``), and the one
        #: ``StoreGuard`` every store call goes through (the parts see them in ``writer``)
        self.coordination: Coordination = choose(store, self.config, self.runs.active)
        self.guard: StoreGuard = self.coordination.guard
        self.writer.coordination = self.coordination

    @property
    def task_group(self) -> anyio.abc.TaskGroup | None:
        """The engine's task group while it runs (``async with engine``), else None."""
        return self._tg

    @property
    def running(self) -> int:
        """How many tasks have work running in this engine, or an outcome the store has not
        taken yet (``outcomes.py``)."""
        return len(self.runs)

    # ------------------------------------------------------------------ shared by the calls

    async def status_changed(self, rec: TaskRecord) -> None:
        """A status changed that this engine's runs did not make (a worker's): to the
        events sink (R-NOTIFY-1)."""
        self.events.status(rec)

    async def transition(
        self, task_id: str, status: protocol.TaskStatus, **kw: Any
    ) -> TaskRecord | None:
        return await self.writer.transition(task_id, status, **kw)

    def _expired(self, rec: TaskRecord) -> None:
        """Forget an expired task (R-TTL-3): tombstone, stop its work, wake its waiters."""
        self.tombstones.add(rec.requestor, rec.task_id)
        self.retention.forget(rec.task_id)
        self.runs.forget(rec.task_id)
        self.runs.stop(rec.task_id, forget=True)
        self.events.expired(rec)

    async def ended(self, rec: TaskRecord, size: int) -> None:
        """A task of this engine ended keeping ``size`` bytes of result, error and
        statusMessage: drop the oldest finished tasks past its budget's byte cap, then past
        the total (R-SEC-4)."""
        for owner, task_id in self.retention.finished(rec.task_id, size):
            await self._drop(owner, task_id)

    def _drop_beside(self, tg: anyio.abc.TaskGroup, dropped: Dropped) -> Dropped:
        """The drops a creation's admission made (R-SEC-4) left to make after it: none on a
        store that batches (spawned now, they queue in the creation's round trip)."""
        if dropped and self._store.batches:
            for owner, old in dropped:
                tg.start_soon(self._drop, owner, old, name="mcp-tasks retention drop")
            return []
        return dropped

    async def _drop(self, requestor: str, task_id: str) -> None:
        """Delete a finished task of ``requestor`` to keep a budget (its own, or the total)
        under its caps: it answers as an expired one from now on (``Retention``)."""
        self.tombstones.add(requestor, task_id)
        self.runs.forget(task_id)
        try:  # queued in the store, the delete is sent whatever is cancelled meanwhile
            deleted = await self.guard.delete(task_id)
        except TaskError as exc:
            log.warning("could not drop task %s: %s", task_id, exc.message)
            return
        if deleted:
            audit("dropped", requestor, task_id, reason="retention_limit")

    async def lookup(self, requestor: str, task_id: str, face: str | None = None) -> TaskRecord:
        """The requestor's own live task of ``face`` (any face when None), else
        ``TaskNotFound``/``TaskExpired`` (R-ERR-1, R-SEC-1, R-TTL-3)."""
        rec = self.runs.recent(task_id)  # its work ended here a moment ago: no read
        if rec is None:
            if not storable_id(task_id):  # no store could hold it: not one of ours
                audit("lookup_rejected", requestor, None)
                raise TaskNotFound()
            rec = await self.guard.get_own(task_id, requestor)
            self.runs.remember(rec)  # a terminal one, polled again and again: kept here
        if (
            rec is not None
            and rec.requestor == requestor
            and (face is None or rec.face == face)
            and ((expires := rec.expires_at) is None or expires > self.clock())
        ):
            return rec  # the common case of ``checked``, without its call
        return await self.checked(requestor, task_id, rec, face)

    async def checked(
        self, requestor: str, task_id: str, rec: TaskRecord | None, face: str | None = None
    ) -> TaskRecord:
        """``rec`` (the task as just read, or as a write of this engine returned it) when it
        is the requestor's own live task of ``face``, else as ``lookup`` refuses it."""
        if rec is None or rec.requestor != requestor or (face is not None and rec.face != face):
            if (requestor, task_id) in self.tombstones:
                raise TaskExpired()
            # Another requestor's (or face's) task is answered exactly like an unknown one.
            audit("lookup_rejected", requestor, task_id)
            raise TaskNotFound()
        expires = rec.expires_at
        if expires is not None and expires <= (now := self.clock()):
            # Its work runs here: renewed, not expired (EngineConfig.keep_running_tasks).
            kept = await self.runs.keep_alive(rec, now)
            if kept is not None:
                return kept
            self.runs.forget(task_id)
            if await self.guard.delete(task_id):
                self._expired(rec)
            raise TaskExpired()
        return rec

    # ------------------------------------------------------------------ the neutral API

    async def start(
        self,
        requestor: str,
        face: str,
        method: str,
        work: Work,
        *,
        ttl_ms: int | None | Default = DEFAULT,
        tool_error: protocol.TaskStatus,
        progress_token: str | int | None = None,
        is_error_result: IsErrorResult | None = None,
        tool: str | None = None,
        budget: str | None = None,
        held_bytes: int = 0,
    ) -> TaskRecord:
        """Store a new task and start its work; the record is returned once the store has
        it (R-CREATE-2). ``ttl_ms`` is the ttl asked for (the policy applies, R-TTL-2).
        ``budget``: what the task counts against among the tasks and bytes kept (R-SEC-4),
        shared by several requestors (a client address's), else the requestor's own;
        ``held_bytes``: what its work holds while it runs (its request's arguments), counted
        until its outcome's bytes replace them. Raises only ``TaskError`` subclasses."""
        tg = self._tg
        if tg is None:
            raise InternalError(detail="the task engine is not running (use `async with engine`)")
        self.rate.check(requestor)  # a creation is a task operation (R-SEC-3)
        # Work an executor runs elsewhere: stored through its guard, then handed over
        # instead of started here (executor.py).
        handed = work if isinstance(work, HandedWork) else None
        ttl = ttl_policy(self.config, ttl_ms)
        task_id = secrets.token_urlsafe(16)  # 128 bits from `secrets` (R-ID-1, R-ID-2)
        retention = self.retention
        dropped = self._drop_beside(tg, retention.admit(requestor, task_id, held_bytes, budget))
        limit = self.active_limit
        limit.acquire(requestor)
        try:
            now = self.clock()
            rec = TaskRecord(
                task_id=task_id,
                requestor=requestor,
                method=method,
                status=protocol.INITIAL,  # R-STATE-1
                created_at=now,
                last_updated_at=now,
                ttl_ms=ttl,
                poll_interval_ms=self.config.poll_interval_ms,
                face=face,
                tool=tool,
            )
            runs = self.runs
            run = None if handed else runs.register(task_id, requestor, tool_error, now, ttl)
            try:
                # The count and the write in one store call (R-SEC-4).
                room = limit.limit if self._atomic_limit else limit.room(requestor)
                guard = self.guard if handed is None else handed.guard
                created = await guard.create_limited(rec, room)
            except TaskError as exc:
                runs.discard(task_id)
                if isinstance(exc, StoreUnavailable):  # it may have been written all the same
                    runs.doubts.doubt(rec.task_id, rec.expires_at)
                retention.forget(task_id)
                raise
            if not created:
                runs.discard(task_id)
                retention.forget(task_id)
                limit.refuse(requestor)
        finally:
            limit.release(requestor)
            for owner, old in dropped:  # forgotten by the ledger already: gone either way
                await self._drop(owner, old)
        audit("created", requestor, rec.task_id, method=method, ttl=ttl)
        events = self.events
        if events.on_created:
            events.created(rec)
        if run is None:
            assert handed is not None
            await self.runs.hand_over(handed, rec, tool_error, progress_token)
            return rec
        self.runs.start(rec, run, work, is_error_result, progress_token)
        return rec

    async def holds(self, requestor: str, task_id: str, *, face: str | None = None) -> bool:
        """Whether the store holds such a task (expired too: ``record`` says so), read as
        ``lookup`` reads it, nothing counted or audited; unanswered, yes (``record`` tells)."""
        rec = self.runs.recent(task_id)
        try:
            if rec is None and storable_id(task_id):
                rec = await self.guard.get(task_id)
        except TaskError:
            return True
        return rec is not None and rec.requestor == requestor and face in (None, rec.face)

    async def record(self, requestor: str, task_id: str, *, face: str | None = None) -> TaskRecord:
        """The task (rate-limited, R-SEC-3)."""
        self.rate.check(requestor)
        rec = await self.lookup(requestor, task_id, face)
        audit("retrieved", requestor, task_id, status=rec.status.value)
        return rec

    async def view(self, requestor: str, task_id: str, *, face: str | None = None) -> TaskView:
        """The task and its outstanding input requests (when ``input_required``)."""
        rec = await self.record(requestor, task_id, face=face)
        if rec.status != protocol.INPUT_REQUIRED:
            return TaskView(rec)
        inputs = await self.coordination.inputs(task_id, requestor)
        return TaskView(rec, tuple(inputs))

    async def answer(
        self, requestor: str, task_id: str, answers: Answers, *, face: str | None = None
    ) -> set[str]:
        """Answer outstanding input requests by key; returns the keys taken (see the
        module's docstring)."""
        self.rate.check(requestor)
        rec = await self.lookup(requestor, task_id, face)
        if rec.status in protocol.TERMINAL or not answers:
            return set()
        # Taken, and the task back to working when none is left, in one step (R-INPUT-4).
        taken, new = await self.coordination.answer_inputs(
            task_id, requestor, answers, self.clock()
        )
        audit("input_answered", requestor, task_id, keys=len(taken))
        if new is not None:
            self.events.status(new)
        return taken

    async def cancel(
        self, requestor: str, task_id: str, *, face: str | None = None
    ) -> tuple[TaskRecord, bool]:
        """Move the task to cancelled (R-CANCEL-2): ``(new record, True)``, or ``(record,
        False)`` when it is (or meanwhile became) terminal."""
        self.rate.check(requestor)
        rec = await self.lookup(requestor, task_id, face)
        if rec.status in protocol.TERMINAL:
            return rec, False
        new = await self._cancel_record(rec, CANCELLED_MESSAGE)
        if new is None:  # it ended meanwhile
            return await self.lookup(requestor, task_id, face), False
        return new, True

    async def wait_terminal(
        self,
        requestor: str,
        task_id: str,
        deliver: InputHandler | None = None,
        *,
        face: str | None = None,
        until_input: bool = False,
    ) -> TaskRecord:
        """The task once terminal (R-RESULT-2), handing its input requests to ``deliver``
        meanwhile, whichever instance runs the work. ``until_input`` (a caller that cannot
        deliver input): a task that asks for input first is returned as it is, for the
        caller to hand the request to one that can (R-INPUT-3). The request is counted
        against the rate limit as it arrives, before any wait (R-SEC-3)."""
        self.rate.check(requestor)
        if until_input:
            rec = await await_settled(self, requestor, task_id, face)
            if rec.status not in protocol.TERMINAL:
                return rec
        else:
            rec = await await_terminal(self, requestor, task_id, deliver, face)
        audit("result_retrieved", requestor, task_id, status=rec.status.value)
        return rec

    async def list_page(
        self, requestor: str, cursor: str | None, *, face: str | None = None
    ) -> tuple[list[TaskRecord], str | None]:
        """One page of the requestor's live tasks of ``face`` and the cursor of the next."""
        self.rate.check(requestor)
        codec = await self.coordination.cursor_codec()
        after: tuple[float, str] | None = None
        if cursor is not None:
            try:
                after = codec.decode(requestor, cursor)
            except CursorError as exc:  # one answer, whatever the cause (R-SEC-1)
                audit("cursor_rejected", requestor, None, reason=exc.reason)
                raise InvalidCursor(detail=f"params.cursor was {exc}") from None
        # The store skips other faces' tasks; expired ones no sweep removed yet are skipped
        # here, reading on until the page is full and one more live task shows that
        # another page follows (at most LIST_READS reads: then the page ends where the
        # reading stopped).
        size, now = self.config.page_size, self.clock()
        live: list[TaskRecord] = []
        for _ in range(LIST_READS):
            recs = await self.guard.list_tasks(requestor, after=after, limit=size + 1, face=face)
            for r in recs:
                expires = r.expires_at
                if (expires is None or expires > now) and (face is None or r.face == face):
                    live.append(r)
                    if len(live) > size:
                        last = live[size - 1]
                        return live[:size], codec.encode(requestor, last.created_at, last.task_id)
            if len(recs) <= size:
                return live, None
            after = (recs[-1].created_at, recs[-1].task_id)
        assert after is not None
        return live, codec.encode(requestor, *after)

    # ------------------------------------------------------------------ expiry

    async def sweep(self) -> int:
        """Remove expired tasks now (R-TTL-3, R-SEC-4); returns how many. Costs O(expired).

        First the tasks whose work ended here without a stored outcome get it written again
        (``outcomes.py``: from the kept outcome), and the ttls of running work near their
        expiry are renewed (``EngineConfig.keep_running_tasks``): neither is expired."""
        await self.runs.sweep(self.clock())
        n = 0
        while True:
            batch = await self.guard.pop_expired(self.clock(), 1000)
            for rec in batch:
                self._expired(rec)
            n += len(batch)
            if len(batch) < 1000:
                break
        for rec in await self.coordination.recover_on_sweep(self.clock()):
            self.events.status(rec)
        self.rate.prune()
        return n

    async def _sweeper(self) -> None:
        store_down = False
        while True:
            await anyio.sleep(self.config.sweep_interval_s)
            try:
                await self.sweep()
                if store_down:
                    log.warning("task store available again")
                store_down = False
            except StoreUnavailable as exc:
                if not store_down:  # once per outage, not every sweep
                    log.warning("TTL sweep: %s", exc.message)
                store_down = True
            except Exception:
                log.exception("TTL sweep failed")

    # ------------------------------------------------------------------ cancelling

    async def _cancel_record(self, rec: TaskRecord, message: str) -> TaskRecord | None:
        """Move a task to cancelled and stop its work (R-CANCEL-2); None if it ended first."""
        await self.runs.before_end(rec.task_id)  # its ttl counts from this end now
        new = await self.transition(rec.task_id, protocol.CANCELLED, **cancel_change(message))
        if new is None:
            return None
        audit("cancel_requested", rec.requestor, rec.task_id)
        self.runs.stop(rec.task_id)
        self.events.status(new, audited=False)
        await self.events.ended(new, outcome_size(None, new.error, new.status_message))
        return new

    async def cancel_task(self, task_id: str, message: str) -> tuple[TaskRecord | None, bool]:
        """An operator's cancel of any requestor's task, by the rules of ``cancel``
        (R-CANCEL-2): ``(new record, True)``; ``(record, False)`` when it is (or meanwhile
        became) terminal; ``(None, False)`` when there is no such task. Not rate-limited:
        the caller is no requestor."""
        rec = await self.guard.get(task_id)
        if rec is None or rec.status in protocol.TERMINAL:
            return rec, False
        new = await self._cancel_record(rec, message)
        if new is None:
            return await self.guard.get(task_id), False
        return new, True

    async def cancel_requestor_tasks(self, requestor: str, reason: str) -> int:
        """Cancel every non-terminal task of ``requestor`` (e.g. its session ended), with
        ``reason`` as statusMessage; returns how many were cancelled."""
        n = 0
        after: tuple[float, str] | None = None
        while True:
            page = await self.guard.list_tasks(requestor, after=after, limit=500)
            for rec in page:
                if rec.status not in protocol.TERMINAL and await self._cancel_record(rec, reason):
                    n += 1
            if len(page) < 500:
                return n
            after = (page[-1].created_at, page[-1].task_id)
