"""``TaskEngine``: the transport-free receiver side of MCP Tasks.

It implements the generated ``TasksHandlerBase`` (``tasks/get``, ``tasks/result``,
``tasks/list``, ``tasks/cancel``) over any ``TaskStore`` and runs the work of
task-augmented requests in the background, one anyio cancel scope per task.

Usage::

    async with TaskEngine(InMemoryTaskStore()) as engine:
        created = await engine.create_task(ctx, "tools/call", work, task={"ttl": 60_000})
        answer = await engine.handle("tasks/result", {"taskId": ...}, ctx)

Limits and defaults (R-SEC-3, R-SEC-4; see ``EngineConfig``):

- ttl: 1 hour when the requestor asks none, at most 24 hours (a larger request is
  clamped and the actual ttl is reported); ``null`` (unlimited) only with
  ``allow_unlimited_ttl``.
- at most 100 non-terminal tasks per requestor: ``ConcurrencyLimitExceeded`` (-32000);
- at most 1000 ``tasks/*`` calls per requestor per 10 s: ``RateLimitExceeded`` (-32000);
- ``tasks/list`` pages of 50.

Audit events go to the ``<package>.audit`` logger (R-SEC-5) with ``extra``
fields ``audit_event``, ``requestor`` and ``task_id``.
"""

from __future__ import annotations

import logging
import math
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
from pydantic import ValidationError

from .. import models
from ..errors import (
    ConcurrencyLimitExceeded,
    InternalError,
    InvalidCursor,
    InvalidParams,
    JsonRpcError,
    RateLimitExceeded,
    StoreUnavailable,
    TaskAlreadyTerminal,
    TaskError,
    TaskExpired,
    TaskNotFound,
    describe_validation_error,
)
from ..handlers import DISPATCH, RequestContext, TasksHandlerBase, dump
from ..lifecycle import (
    CANCELLED,
    COMPLETED,
    FAILED,
    INPUT_REQUIRED,
    NON_TERMINAL,
    TERMINAL,
    WORKING,
)
from ..meta import MODEL_IMMEDIATE_RESPONSE_KEY, with_related_task
from ..store import TaskRecord, TaskStore
from .cursor import CursorCodec, CursorError
from .memory import InMemoryTaskStore

_PKG = __name__.rsplit(".", 2)[0]
audit_log = logging.getLogger(f"{_PKG}.audit")
log = logging.getLogger(f"{_PKG}.runtime")

#: JSON-RPC error stored for a cancelled task: ``tasks/result`` answers it (R-RESULT-1).
CANCELLED_ERROR: dict[str, Any] = {
    "code": -32800,
    "message": "Request cancelled: the task was cancelled",
}
#: statusMessage and error of tasks interrupted by a process that died or shut down.
INTERRUPTED_MESSAGE = "Task failed: the server stopped before the task finished"
#: statusMessage and error of tasks whose instance stopped renewing its lease (shared stores).
LEASE_EXPIRED_MESSAGE = (
    "Task failed: the server instance running it stopped responding (its lease expired)"
)

StatusHook = Callable[[str, dict[str, Any]], Awaitable[None]]
ProgressHook = Callable[[str, str | int, float, float | None, str | None, str], Awaitable[None]]
Work = Callable[["TaskContext"], Awaitable[dict[str, Any]]]
InputHandler = Callable[["PendingInput"], Awaitable[dict[str, Any]]]


@dataclass
class EngineConfig:
    """Engine settings; every limit has a safe default (R-SEC-3, R-SEC-4)."""

    default_ttl_ms: int | None = 3_600_000
    max_ttl_ms: int = 86_400_000
    allow_unlimited_ttl: bool = False
    poll_interval_ms: int | None = 500
    page_size: int = 50
    max_active_per_requestor: int = 100
    rate_limit_calls: int = 1000
    rate_limit_window_s: float = 10.0
    sweep_interval_s: float = 1.0
    cursor_secret: bytes | None = None
    #: recently expired task IDs remembered per requestor to answer "Task has expired"
    expired_tombstones_per_requestor: int = 1024
    #: requestors whose tombstones are kept (least recently expired dropped first)
    tombstone_requestors: int = 10_000
    #: tombstones kept in all (about 140 bytes each; the oldest are dropped first): without
    #: it, many sessions expiring ttl-0 tasks could pin 10,000 x 1024 IDs (~1.4 GiB)
    max_tombstones: int = 100_000
    #: shared stores: longest wait for a change event before re-reading the store anyway
    #: (the bounded fallback poll when a message was missed)
    watch_fallback_s: float = 1.0
    #: shared stores: how long a tasks/result call holds an input request it delivers
    #: before another instance may deliver it (renewed while the call waits)
    input_claim_s: float = 30.0

    def __post_init__(self) -> None:
        if self.max_ttl_ms < 0 or self.page_size < 1 or self.max_active_per_requestor < 1:
            raise ValueError("max_ttl_ms >= 0, page_size >= 1, max_active_per_requestor >= 1")
        if self.default_ttl_ms is None and not self.allow_unlimited_ttl:
            self.default_ttl_ms = self.max_ttl_ms
        if self.default_ttl_ms is not None:
            self.default_ttl_ms = min(max(0, self.default_ttl_ms), self.max_ttl_ms)


@dataclass(eq=False)
class PendingInput:
    """A request the work sends to its requestor (R-INPUT-*), delivered on ``tasks/result``.

    ``params`` carry the related-task ``_meta`` (R-INPUT-2)."""

    id: str
    task_id: str
    method: str
    params: dict[str, Any]
    claimed: bool = field(default=False, repr=False)
    answered: anyio.Event = field(default_factory=anyio.Event, repr=False)
    answer: dict[str, Any] | None = field(default=None, repr=False)
    error: TaskError | None = field(default=None, repr=False)


class _Run:
    """A task running in this engine: its cancel scope, pending inputs, change signal."""

    __slots__ = ("_changed", "pending", "requestor", "scope")

    def __init__(self, requestor: str) -> None:
        self.requestor = requestor
        self.scope = anyio.CancelScope()
        self.pending: dict[str, PendingInput] = {}
        # Made on first use: most tasks finish before anyone waits on them, and an
        # anyio.Event costs a backend lookup (about 1% of a task's CPU, benchmarks/peers).
        self._changed: anyio.Event | None = None

    @property
    def changed(self) -> anyio.Event:
        """The event the next ``signal()`` sets."""
        ev = self._changed
        if ev is None:
            ev = self._changed = anyio.Event()
        return ev

    def signal(self) -> None:
        """Wake every waiter (each waits on the event it saw; a fresh one replaces it)."""
        ev, self._changed = self._changed, None
        if ev is not None:
            ev.set()


class TaskContext:
    """What a task's work gets: its identity, progress, status message and input requests."""

    def __init__(
        self, engine: TaskEngine, task_id: str, requestor: str, progress_token: str | int | None
    ) -> None:
        self._engine = engine
        self.task_id = task_id
        self.requestor = requestor
        self.progress_token = progress_token

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Progress against the original request's token, after ``CreateTaskResult`` too (R-PROGRESS-1)."""
        hook = self._engine.on_progress
        if hook is None or self.progress_token is None:
            return
        try:
            await hook(self.requestor, self.progress_token, progress, total, message, self.task_id)
        except Exception:
            log.exception("progress hook failed for task %s", self.task_id)

    async def set_status_message(self, message: str) -> None:
        await self._engine._set_message(self.task_id, message)

    async def request_input(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """Ask the requestor (``elicitation/create``, ``sampling/createMessage``, ...) and wait.

        The task is ``input_required`` until every pending request is answered, then
        ``working`` again (R-INPUT-1, R-INPUT-4). Cancelling the task ends the wait.
        An error answer is raised here as a ``TaskError``."""
        return await self._engine._request_input(self.task_id, method, params)


class TaskEngine(TasksHandlerBase):
    """The tasks/* handlers plus background execution of task-augmented requests."""

    def __init__(
        self,
        store: TaskStore | None = None,
        config: EngineConfig | None = None,
        *,
        on_status: StatusHook | None = None,
        on_progress: ProgressHook | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store: TaskStore = store if store is not None else InMemoryTaskStore()
        self.config = config if config is not None else EngineConfig()
        self.on_status = on_status
        self.on_progress = on_progress
        self.clock = clock
        self._cursors = CursorCodec(self.config.cursor_secret)
        self._runs: dict[str, _Run] = {}
        self._reserved: dict[str, int] = {}
        self._rate: dict[str, tuple[float, int]] = {}
        self._tombstones: OrderedDict[str, OrderedDict[str, None]] = OrderedDict()
        self._tombstone_count = 0
        self._tg: anyio.abc.TaskGroup | None = None

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> TaskEngine:
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        try:
            await self.store.start(tg)
            if self.config.cursor_secret is None and self.store.shared:
                # A cursor issued by one instance must verify on every other one.
                try:
                    secret = await self.store.shared_secret()
                except Exception:
                    log.warning("task store unavailable: cursors valid on this instance only")
                    secret = None
                if secret is not None:
                    self._cursors = CursorCodec(secret)
            try:
                recovered = await self.store.recover(self.clock(), INTERRUPTED_MESSAGE)
            except Exception:
                if not self.store.shared:
                    raise
                # A shared store may be down now: serve anyway (task calls answer "Task
                # store unavailable" until it is back); the sweeper reaps leases later.
                log.warning("task store unavailable at start", exc_info=True)
                recovered = []
            for rec in recovered:
                self._audit("status_changed", rec.requestor, rec.task_id, status=rec.status.value)
                await self._emit(rec)
        except BaseException:
            self._tg = None
            tg.cancel_scope.cancel()
            await tg.__aexit__(None, None, None)
            raise
        tg.start_soon(self._sweeper)
        return self

    async def __aexit__(self, *exc: object) -> None:
        tg, self._tg = self._tg, None
        if tg is not None:
            tg.cancel_scope.cancel()
            await tg.__aexit__(None, None, None)

    @property
    def running(self) -> int:
        """How many tasks have work running in this engine."""
        return len(self._runs)

    # ------------------------------------------------------------------ helpers

    def _audit(self, event: str, requestor: str, task_id: str | None, **fields: Any) -> None:
        if audit_log.isEnabledFor(logging.INFO):
            audit_log.info(
                "%s requestor=%r task=%s %s",
                event,
                requestor,
                task_id,
                " ".join(f"{k}={v}" for k, v in fields.items()),
                extra={"audit_event": event, "requestor": requestor, "task_id": task_id, **fields},
            )

    async def _emit(self, rec: TaskRecord) -> None:
        """R-NOTIFY-1: the whole Task, no related-task ``_meta`` (R-NOTIFY-3)."""
        if self.on_status is None:
            return
        try:
            await self.on_status(rec.requestor, rec.wire())
        except Exception:
            log.exception("on_status hook failed for task %s", rec.task_id)

    async def _transition(
        self, task_id: str, status: models.TaskStatus, **kw: Any
    ) -> TaskRecord | None:
        try:
            return await self.store.transition(task_id, status, now=self.clock(), **kw)
        except TaskError:
            raise
        except Exception as exc:
            raise _store_error(exc) from exc

    def _check_rate(self, requestor: str) -> None:
        """R-SEC-3: fixed-window counter per requestor."""
        cfg = self.config
        now = time.monotonic()
        start, count = self._rate.get(requestor, (now, 0))
        if now - start >= cfg.rate_limit_window_s:
            start, count = now, 0
        count += 1
        self._rate[requestor] = (start, count)
        if count > cfg.rate_limit_calls:
            self._audit("rate_limited", requestor, None)
            raise RateLimitExceeded(cfg.rate_limit_calls, cfg.rate_limit_window_s)

    def _tombstone(self, requestor: str, task_id: str) -> None:
        stones = self._tombstones.get(requestor)
        if stones is None:
            stones = self._tombstones[requestor] = OrderedDict()
            while len(self._tombstones) > self.config.tombstone_requestors:
                self._tombstone_count -= len(self._tombstones.popitem(last=False)[1])
        else:
            self._tombstones.move_to_end(requestor)
        if task_id not in stones:
            stones[task_id] = None
            self._tombstone_count += 1
        while len(stones) > self.config.expired_tombstones_per_requestor:
            stones.popitem(last=False)
            self._tombstone_count -= 1
        while self._tombstone_count > self.config.max_tombstones and self._tombstones:
            oldest_requestor, oldest = next(iter(self._tombstones.items()))
            oldest.popitem(last=False)
            self._tombstone_count -= 1
            if not oldest:
                del self._tombstones[oldest_requestor]

    def _is_tombstoned(self, requestor: str, task_id: str) -> bool:
        stones = self._tombstones.get(requestor)
        return stones is not None and task_id in stones

    async def _expired(self, rec: TaskRecord) -> None:
        """Forget an expired task (R-TTL-3): tombstone, stop its work, wake its waiters."""
        self._tombstone(rec.requestor, rec.task_id)
        self._audit("expired", rec.requestor, rec.task_id, status=rec.status.value)
        run = self._runs.pop(rec.task_id, None)
        if run is not None:
            run.scope.cancel()
            run.signal()

    async def _lookup(self, task_id: str, ctx: RequestContext) -> TaskRecord:
        """The requestor's own live task, or -32602 (R-ERR-1, R-SEC-1, R-TTL-3)."""
        try:
            rec = await self.store.get(task_id)
        except Exception as exc:
            raise _store_error(exc) from exc
        if rec is None or rec.requestor != ctx.requestor:
            if self._is_tombstoned(ctx.requestor, task_id):
                raise TaskExpired()
            # Another requestor's task is answered exactly like an unknown one (R-SEC-1).
            self._audit("lookup_rejected", ctx.requestor, task_id)
            raise TaskNotFound()
        expires = rec.expires_at
        if expires is not None and expires <= self.clock():
            if await self.store.delete(task_id):
                await self._expired(rec)
            raise TaskExpired()
        return rec

    # ------------------------------------------------------------------ creating

    def _ttl(self, task: Mapping[str, Any] | None) -> int | None:
        """The actual ttl (R-TTL-2): default when absent, clamped to the maximum."""
        cfg = self.config
        if task is None:
            return cfg.default_ttl_ms
        if not isinstance(task, Mapping):
            raise InvalidParams(detail="params.task: must be an object")
        if "ttl" not in task:
            return cfg.default_ttl_ms
        ttl = task["ttl"]
        if ttl is None:
            return None if cfg.allow_unlimited_ttl else cfg.max_ttl_ms
        if isinstance(ttl, float) and math.isfinite(ttl) and ttl.is_integer():
            ttl = int(ttl)
        if isinstance(ttl, bool) or not isinstance(ttl, int):
            raise InvalidParams(detail="params.task.ttl: must be an integer number of milliseconds")
        if ttl < 0:
            raise InvalidParams(detail="params.task.ttl: must not be negative")
        # Clamped before any arithmetic: 10**15 never reaches a timer or a date (R-SEC-4).
        return min(ttl, cfg.max_ttl_ms)

    async def create_task(
        self,
        ctx: RequestContext,
        method: str,
        work: Work,
        *,
        task: Mapping[str, Any] | None = None,
        immediate_response: str | None = None,
        is_error_result: Callable[[dict[str, Any]], bool] | None = None,
    ) -> dict[str, Any]:
        """Accept a task-augmented request and start its work; return ``CreateTaskResult``
        wire JSON at once (R-CREATE-2). Raises only ``TaskError`` subclasses."""
        tg = self._tg
        if tg is None:
            raise InternalError(detail="the task engine is not running (use `async with engine`)")
        ttl = self._ttl(task)
        requestor = ctx.requestor
        limit = self.config.max_active_per_requestor
        self._reserved[requestor] = self._reserved.get(requestor, 0) + 1
        try:
            try:
                active = await self.store.count_active(requestor)
            except Exception as exc:
                raise _store_error(exc) from exc
            if active + self._reserved[requestor] > limit:
                self._audit("create_rejected", requestor, None, reason="concurrency_limit")
                raise ConcurrencyLimitExceeded(limit)
            now = self.clock()
            rec = TaskRecord(
                task_id=secrets.token_urlsafe(16),  # 128 bits from `secrets` (R-ID-1, R-ID-2)
                requestor=requestor,
                method=method,
                status=WORKING,  # R-STATE-1
                created_at=now,
                last_updated_at=now,
                ttl_ms=ttl,
                poll_interval_ms=self.config.poll_interval_ms,
            )
            run = _Run(requestor)
            self._runs[rec.task_id] = run
            try:
                await self.store.create(rec)
            except Exception as exc:
                self._runs.pop(rec.task_id, None)
                raise _store_error(exc) from exc
        finally:
            left = self._reserved[requestor] - 1
            if left:
                self._reserved[requestor] = left
            else:
                del self._reserved[requestor]
        self._audit("created", requestor, rec.task_id, method=method, ttl=ttl)
        tc = TaskContext(self, rec.task_id, requestor, ctx.progress_token)
        tg.start_soon(self._run, rec.task_id, run, tc, work, is_error_result)
        if self.store.shared:
            tg.start_soon(self._monitor, rec.task_id, run)
        out: dict[str, Any] = {"task": rec.wire()}
        if immediate_response is not None:
            out["_meta"] = {MODEL_IMMEDIATE_RESPONSE_KEY: immediate_response}  # R-CREATE-3
        return out

    async def _run(
        self,
        task_id: str,
        run: _Run,
        tc: TaskContext,
        work: Work,
        is_error_result: Callable[[dict[str, Any]], bool] | None,
    ) -> None:
        outcome: tuple[models.TaskStatus, str | None, dict[str, Any] | None, dict[str, Any] | None]
        outcome_set = False
        try:
            with run.scope:
                try:
                    result = await work(tc)
                    if not isinstance(result, dict):
                        raise InternalError(detail="the task's work returned a non-object result")
                    failed = (
                        is_error_result(result)
                        if is_error_result is not None
                        else result.get("isError") is True
                    )
                    if failed:  # R-STATE-4: a tool result with isError
                        outcome = (FAILED, _error_text(result), result, None)
                    else:
                        outcome = (COMPLETED, None, result, None)
                except TaskError as exc:  # R-RESULT-1: the same JSON-RPC error
                    outcome = (FAILED, exc.message, None, exc.to_error())
                except Exception as exc:
                    log.exception("task %s: work raised", task_id)
                    err = InternalError(detail=f"{type(exc).__name__}: {exc}")
                    outcome = (FAILED, err.message, None, err.to_error())
                outcome_set = True
        finally:
            with anyio.CancelScope(shield=True):
                if outcome_set:
                    await self._finish(task_id, run, *outcome)
                elif not run.scope.cancel_called:
                    # The engine shut down under the work.
                    await self._finish(
                        task_id,
                        run,
                        FAILED,
                        INTERRUPTED_MESSAGE,
                        None,
                        InternalError(message=INTERRUPTED_MESSAGE).to_error(),
                    )
                else:
                    self._end_run(task_id, run)

    async def _finish(
        self,
        task_id: str,
        run: _Run,
        status: models.TaskStatus,
        message: str | None,
        result: dict[str, Any] | None,
        error: dict[str, Any] | None,
    ) -> None:
        try:
            try:
                # A late outcome after a cancel or expiry is a no-op (R-CANCEL-3).
                rec = await self._transition(
                    task_id,
                    status,
                    expected=NON_TERMINAL,
                    status_message=message,
                    result=result,
                    error=error,
                )
            except StoreUnavailable:
                log.exception("task %s: could not store its outcome", task_id)
                err = InternalError(detail="the task's outcome could not be stored")
                rec = await self._transition(
                    task_id,
                    FAILED,
                    expected=NON_TERMINAL,
                    status_message=err.message,
                    error=err.to_error(),
                )
        except Exception:
            log.exception("task %s: could not store its outcome", task_id)
            rec = None
        if rec is not None:
            self._audit("status_changed", rec.requestor, task_id, status=rec.status.value)
            await self._emit(rec)
        self._end_run(task_id, run)

    async def _monitor(self, task_id: str, run: _Run) -> None:
        """Shared stores: stop the work here when another instance ends the task (a cancel,
        an expiry, a lease reap): R-CANCEL-2 across instances."""
        with self.store.watch(task_id) as watch:
            while self._runs.get(task_id) is run:
                await watch.wait(5 * self.config.watch_fallback_s)
                if self._runs.get(task_id) is not run:
                    return
                try:
                    rec = await self.store.get(task_id)
                except Exception:
                    continue  # store unavailable: keep working, look again later
                if rec is None or rec.status in TERMINAL:
                    run.scope.cancel()
                    run.signal()
                    return
                run.signal()

    def _end_run(self, task_id: str, run: _Run) -> None:
        if self._runs.get(task_id) is run:
            del self._runs[task_id]
        run.signal()

    async def _set_message(self, task_id: str, message: str) -> None:
        rec = await self.store.get(task_id)
        if rec is None or rec.status in TERMINAL:
            return
        await self._transition(task_id, rec.status, expected=(rec.status,), status_message=message)
        run = self._runs.get(task_id)
        if run is not None:
            run.signal()

    async def _request_input(
        self, task_id: str, method: str, params: Mapping[str, Any]
    ) -> dict[str, Any]:
        run = self._runs.get(task_id)
        if run is None:
            raise InternalError(detail="request_input outside a running task")
        out = dict(params)
        out["_meta"] = with_related_task(params.get("_meta"), task_id)  # R-INPUT-2
        pending = PendingInput(id=secrets.token_hex(8), task_id=task_id, method=method, params=out)
        run.pending[pending.id] = pending
        store = self.store
        # Shared stores: the request goes through the store, so a tasks/result held on any
        # instance delivers it, and the answer comes back through the store.
        shared = store.shared
        answer: dict[str, Any] | None = None
        try:
            with store.watch(task_id) as watch:
                if shared:
                    item = {"id": pending.id, "method": method, "params": out}
                    await store.put_input(task_id, run.requestor, item)
                rec = await self._transition(
                    task_id,
                    INPUT_REQUIRED,
                    expected=(WORKING,),
                    status_message=f"Waiting for the requestor to answer {method}",
                )
                if rec is not None:  # R-INPUT-1
                    self._audit("status_changed", rec.requestor, task_id, status=rec.status.value)
                    await self._emit(rec)
                run.signal()
                if shared:
                    while answer is None:
                        answer = await store.take_answer(task_id, run.requestor, pending.id)
                        if answer is None:
                            await watch.wait(self.config.watch_fallback_s)
                else:
                    await pending.answered.wait()
        finally:
            run.pending.pop(pending.id, None)
            with anyio.CancelScope(shield=True):
                if shared and answer is None:
                    try:
                        await store.withdraw_input(task_id, run.requestor, pending.id)
                    except Exception:
                        log.warning("task %s: could not withdraw input %s", task_id, pending.id)
                if not run.pending and not run.scope.cancel_called:
                    rec = await self._transition(task_id, WORKING, expected=(INPUT_REQUIRED,))
                    if rec is not None:  # R-INPUT-4
                        self._audit(
                            "status_changed", rec.requestor, task_id, status=rec.status.value
                        )
                        await self._emit(rec)
        if answer is not None:
            if isinstance(answer.get("error"), dict):
                raise JsonRpcError.from_error(answer["error"])
            result = answer.get("result")
            return dict(result) if isinstance(result, dict) else {}
        if pending.error is not None:
            raise pending.error
        return pending.answer if pending.answer is not None else {}

    # ------------------------------------------------------------------ expiry

    async def sweep(self) -> int:
        """Remove expired tasks now (R-TTL-3, R-SEC-4); returns how many. Costs O(expired)."""
        n = 0
        while True:
            batch = await self.store.pop_expired(self.clock(), 1000)
            for rec in batch:
                await self._expired(rec)
            n += len(batch)
            if len(batch) < 1000:
                break
        if self.store.shared:
            # Tasks of an instance whose lease expired (it died mid-task) become failed.
            for rec in await self.store.recover(self.clock(), LEASE_EXPIRED_MESSAGE):
                self._audit("status_changed", rec.requestor, rec.task_id, status=rec.status.value)
                await self._emit(rec)
        now = time.monotonic()
        window = self.config.rate_limit_window_s
        if len(self._rate) > 1024:
            self._rate = {k: v for k, v in self._rate.items() if now - v[0] < window}
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

    # ------------------------------------------------------------------ tasks/* handlers

    async def tasks_get(
        self, params: models.GetTaskRequestParams, ctx: RequestContext
    ) -> models.GetTaskResult:
        self._check_rate(ctx.requestor)
        rec = await self._lookup(params.taskId, ctx)
        self._audit("retrieved", ctx.requestor, rec.task_id, status=rec.status.value)
        return models.GetTaskResult.model_validate(rec.wire())  # R-GET-3, R-META-3

    async def tasks_cancel(
        self, params: models.CancelTaskRequestParams, ctx: RequestContext
    ) -> models.CancelTaskResult:
        self._check_rate(ctx.requestor)
        return models.CancelTaskResult.model_validate(await self._cancel(params.taskId, ctx))

    async def _cancel(self, task_id: str, ctx: RequestContext) -> dict[str, Any]:
        rec = await self._lookup(task_id, ctx)
        if rec.status in TERMINAL:
            raise TaskAlreadyTerminal(rec.status.value)  # R-CANCEL-1
        new = await self._transition(
            task_id,
            CANCELLED,
            expected=NON_TERMINAL,
            status_message="The task was cancelled by the requestor",
            error=CANCELLED_ERROR,
        )
        if new is None:  # it ended meanwhile
            now_rec = await self._lookup(task_id, ctx)
            raise TaskAlreadyTerminal(now_rec.status.value)
        self._audit("cancelled", ctx.requestor, task_id)
        run = self._runs.get(task_id)
        if run is not None:  # R-CANCEL-2: stop the work (its wait for input too)
            run.scope.cancel()
            run.signal()
        await self._emit(new)
        return new.wire()

    async def tasks_list(
        self, params: models.PaginatedRequestParams, ctx: RequestContext
    ) -> models.ListTasksResult:
        self._check_rate(ctx.requestor)
        return models.ListTasksResult.model_validate(await self._list(params.cursor, ctx))

    async def _list(self, cursor: str | None, ctx: RequestContext) -> dict[str, Any]:
        after: tuple[float, str] | None = None
        if cursor is not None:
            try:
                after = self._cursors.decode(ctx.requestor, cursor)
            except CursorError as exc:
                self._audit("cursor_rejected", ctx.requestor, None)
                raise InvalidCursor(
                    detail=f"params.cursor was not issued by this server for this requestor ({exc})"
                ) from None
        size = self.config.page_size
        try:
            recs = await self.store.list_tasks(ctx.requestor, after=after, limit=size + 1)
        except Exception as exc:
            raise _store_error(exc) from exc
        page = recs[:size]
        now = self.clock()
        out: dict[str, Any] = {
            "tasks": [r.wire() for r in page if r.expires_at is None or r.expires_at > now]
        }
        if len(recs) > size:  # R-LIST-1
            last = page[-1]
            out["nextCursor"] = self._cursors.encode(ctx.requestor, last.created_at, last.task_id)
        return out

    async def tasks_result(
        self, params: models.GetTaskPayloadRequestParams, ctx: RequestContext
    ) -> models.GetTaskPayloadResult:
        self._check_rate(ctx.requestor)
        return models.GetTaskPayloadResult.model_validate(
            await self._result(params.taskId, ctx, None)
        )

    async def _result(
        self, task_id: str, ctx: RequestContext, on_input: InputHandler | None
    ) -> dict[str, Any]:
        """Block until terminal (R-RESULT-2), delivering pending input requests meanwhile."""
        rec = await self._lookup(task_id, ctx)
        if rec.status not in TERMINAL:  # else no task group: the common case costs less
            rec = await self._await_terminal(task_id, ctx, on_input)
        self._audit("result_retrieved", ctx.requestor, task_id, status=rec.status.value)
        if rec.error is not None and rec.result is None:
            raise JsonRpcError.from_error(rec.error)  # R-RESULT-1
        out = dict(rec.result or {})
        out["_meta"] = with_related_task(out.get("_meta"), task_id)  # R-RESULT-4
        return out

    async def _await_terminal(
        self, task_id: str, ctx: RequestContext, on_input: InputHandler | None
    ) -> TaskRecord:
        if self.store.shared:
            return await self._await_terminal_shared(task_id, ctx, on_input)
        delivering: set[str] = set()
        failure: TaskError | None = None
        async with anyio.create_task_group() as tg:
            try:
                while True:
                    run = self._runs.get(task_id)
                    changed = run.changed if run is not None else None
                    rec = await self._lookup(task_id, ctx)
                    if rec.status in TERMINAL:
                        break
                    if changed is None or run is None:
                        # Not running here (another process owns it): poll the store.
                        await anyio.sleep((rec.poll_interval_ms or 500) / 1000.0)
                        continue
                    if on_input is not None:
                        for p in list(run.pending.values()):
                            if not p.claimed and p.id not in delivering:
                                p.claimed = True
                                delivering.add(p.id)
                                tg.start_soon(self._deliver, p, on_input, run, delivering)
                    await changed.wait()
            except TaskError as exc:
                failure = exc
            tg.cancel_scope.cancel()
        if failure is not None:
            raise failure
        return rec

    async def _await_terminal_shared(
        self, task_id: str, ctx: RequestContext, on_input: InputHandler | None
    ) -> TaskRecord:
        """Shared stores: wait for change events from any instance (bounded fallback poll);
        deliver input requests claimed from the store, whichever instance runs the work."""
        delivering: set[str] = set()
        failure: TaskError | None = None
        claimer = secrets.token_hex(8)
        with self.store.watch(task_id) as watch:
            async with anyio.create_task_group() as tg:
                try:
                    while True:
                        rec = await self._lookup(task_id, ctx)
                        if rec.status in TERMINAL:
                            break
                        if on_input is not None and rec.status == INPUT_REQUIRED:
                            # Claiming again renews the claims this call is delivering.
                            try:
                                items = await self.store.claim_inputs(
                                    task_id, ctx.requestor, claimer, self.config.input_claim_s
                                )
                            except Exception as exc:
                                raise _store_error(exc) from exc
                            for item in items:
                                if str(item.get("id")) not in delivering:
                                    delivering.add(str(item.get("id")))
                                    tg.start_soon(
                                        self._deliver_shared, item, on_input, ctx.requestor,
                                        task_id, claimer, delivering,
                                    )  # fmt: skip
                        await watch.wait(self.config.watch_fallback_s)
                except TaskError as exc:
                    failure = exc
                tg.cancel_scope.cancel()
        if failure is not None:
            raise failure
        return rec

    async def _deliver_shared(
        self,
        item: dict[str, Any],
        on_input: InputHandler,
        requestor: str,
        task_id: str,
        claimer: str,
        delivering: set[str],
    ) -> None:
        params = item.get("params")
        p = PendingInput(
            id=str(item.get("id")),
            task_id=task_id,
            method=str(item.get("method")),
            params=dict(params) if isinstance(params, dict) else {},
        )
        stored = False
        try:
            try:
                answer: dict[str, Any] = {"result": await on_input(p)}
            except TaskError as exc:
                answer = {"error": exc.to_error()}
            except Exception as exc:
                err = InternalError(detail=f"input request failed: {type(exc).__name__}")
                answer = {"error": err.to_error()}
            try:
                await self.store.answer_input(task_id, requestor, p.id, answer)
                stored = True
            except Exception:
                log.exception("task %s: could not store the answer to %s", task_id, p.id)
        finally:
            delivering.discard(p.id)
            if not stored:  # this waiter went away: let another tasks/result deliver it
                with anyio.CancelScope(shield=True):
                    try:
                        await self.store.release_input(task_id, requestor, p.id, claimer)
                    except Exception:
                        pass  # the claim lapses by itself

    async def _deliver(
        self, p: PendingInput, on_input: InputHandler, run: _Run, delivering: set[str]
    ) -> None:
        done = False
        try:
            try:
                p.answer = await on_input(p)
            except TaskError as exc:
                p.error = exc
            except Exception as exc:
                p.error = InternalError(detail=f"input request failed: {type(exc).__name__}")
            done = True
            p.answered.set()
        finally:
            delivering.discard(p.id)
            if not done:  # this waiter went away: let another tasks/result deliver it
                p.claimed = False
                run.signal()

    # ------------------------------------------------------------------ raw-dict entry point

    async def handle(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        ctx: RequestContext,
        *,
        on_input: InputHandler | None = None,
    ) -> dict[str, Any]:
        """Answer a ``tasks/*`` request given as raw JSON; returns the wire result.

        Raises only ``TaskError`` subclasses (adapters send ``exc.to_error()``)."""
        try:
            if method == "tasks/result" and on_input is not None:
                model = DISPATCH[method][0]
                try:
                    parsed = model.model_validate(params or {})
                except ValidationError as exc:
                    raise InvalidParams(detail=describe_validation_error(exc)) from None
                self._check_rate(ctx.requestor)
                task_id = getattr(parsed, "taskId")  # noqa: B009
                res = await self._result(str(task_id), ctx, on_input)
                return dump(models.GetTaskPayloadResult.model_validate(res))
            return await self.dispatch(method, params, ctx)
        except TaskError:
            raise
        except Exception as exc:
            log.exception("tasks engine: %s failed", method)
            raise InternalError(detail=type(exc).__name__) from exc


def _store_error(exc: Exception) -> TaskError:
    """A store failure as the error to answer: the store's own ``TaskError`` (e.g. a
    ``StoreUnavailable`` naming what is unreachable) or a generic ``StoreUnavailable``."""
    return exc if isinstance(exc, TaskError) else StoreUnavailable()


def _error_text(result: Mapping[str, Any]) -> str:
    """A statusMessage for a failed tool result (R-STATE-4): its first text, else a summary."""
    content = result.get("content")
    if isinstance(content, list):
        for item in content:
            if isinstance(item, Mapping) and isinstance(item.get("text"), str):
                text: str = item["text"]
                return "Tool error: " + (text if len(text) <= 500 else text[:497] + "...")
    return "Tool error: the tool returned isError"
