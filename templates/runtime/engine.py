"""``TaskEngine``: the transport-free receiver side of MCP Tasks.

It implements the generated ``TasksHandlerBase`` (``tasks/get``, ``tasks/result``,
``tasks/list``, ``tasks/cancel``) over any ``TaskStore`` and runs the work of
task-augmented requests in the background, one anyio cancel scope per task.

Usage::

    async with TaskEngine(InMemoryTaskStore()) as engine:
        created = await engine.create_task(ctx, protocol.TOOLS_CALL, work, task={"ttl": 60_000})
        answer = await engine.handle(protocol.TASKS_RESULT, {"taskId": ...}, ctx)

The engine is a thin set of handlers over its rooms: ``config`` (``EngineConfig``),
``limits`` (rate limit, active tasks, ttl policy), ``tombstones``, ``runs`` (running work,
input hand-over, waiting for the end) and ``coordination`` (local or shared, chosen once
from the store's type; it also owns the one ``StoreGuard`` every store call goes through).

Limits and defaults (R-SEC-3, R-SEC-4): see the README's "Runtime limits" and
``EngineConfig``. Audit events: ``audit.py`` (the ``<package>.audit`` logger, quiet
unless set to INFO).
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
import anyio.abc
from pydantic import ValidationError

from .. import protocol
from ..errors import (
    InternalError,
    InvalidCursor,
    InvalidParams,
    RequestCancelled,
    StoreUnavailable,
    TaskAlreadyTerminal,
    TaskError,
    TaskExpired,
    TaskNotFound,
    describe_validation_error,
    error_from_payload,
)
from ..handlers import DISPATCH, RequestContext, TasksHandlerBase, dump
from ..meta import MODEL_IMMEDIATE_RESPONSE_KEY, with_related_task
from ..store import TaskRecord, TaskStore
from .audit import audit
from .config import EngineConfig
from .coordination import choose
from .cursor import CursorError
from .limits import ActiveLimit, RateLimiter, resolve_ttl
from .memory import InMemoryTaskStore
from .runs import (
    INTERRUPTED_MESSAGE,
    InputHandler,
    IsErrorResult,
    PendingInput,
    Run,
    Runner,
    TaskContext,
    Work,
    await_terminal,
)
from .tombstones import Tombstones

__all__ = ["EngineConfig", "PendingInput", "TaskContext", "TaskEngine"]

_PKG = __name__.rsplit(".", 2)[0]
log = logging.getLogger(f"{_PKG}.runtime")

#: the statusMessage of a task its requestor cancelled
CANCELLED_MESSAGE = "The task was cancelled by the requestor"

StatusHook = Callable[[str, dict[str, Any]], Awaitable[None]]
ProgressHook = Callable[[str, str | int, float, float | None, str | None, str], Awaitable[None]]


def cancelled_error() -> dict[str, Any]:
    """The JSON-RPC error stored for a cancelled task: ``tasks/result`` answers it (R-RESULT-1)."""
    return RequestCancelled(detail="the task was cancelled").to_error()


class TaskEngine(TasksHandlerBase):
    """The tasks/* handlers plus background execution of task-augmented requests."""

    log = log

    def __init__(
        self,
        store: TaskStore | None = None,
        config: EngineConfig | None = None,
        *,
        on_status: StatusHook | None = None,
        on_progress: ProgressHook | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = cfg = config if config is not None else EngineConfig()
        self.on_status = on_status
        self.on_progress = on_progress
        self.clock = clock
        self.runner = Runner(self)
        self.store = store if store is not None else InMemoryTaskStore()
        self.rate = RateLimiter(cfg.rate_limit_calls, cfg.rate_limit_window_s)
        self.active_limit = ActiveLimit(cfg.max_active_per_requestor)
        self.tombstones = Tombstones(
            cfg.expired_tombstones_per_requestor, cfg.tombstone_requestors, cfg.max_tombstones
        )
        self._tg: anyio.abc.TaskGroup | None = None

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> TaskEngine:
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        try:
            await self.store.start(tg)
            now = self.clock()
            for rec in await self.coordination.recover_at_start(now, INTERRUPTED_MESSAGE):
                await self.status_changed(rec)
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
    def store(self) -> TaskStore:
        """The task store. Setting it chooses the coordination again (before ``start``)."""
        return self._store

    @store.setter
    def store(self, store: TaskStore) -> None:
        self._store = store
        self.coordination = choose(store, self.config, self.runner.active)
        self.guard = self.coordination.guard

    @property
    def running(self) -> int:
        """How many tasks have work running in this engine."""
        return len(self.runner)

    # ------------------------------------------------------------------ shared by the rooms

    async def status_changed(self, rec: TaskRecord) -> None:
        """Audit a new status and notify it (R-NOTIFY-1: the whole Task, no related-task
        ``_meta``, R-NOTIFY-3)."""
        audit("status_changed", rec.requestor, rec.task_id, status=rec.status.value)
        await self._emit(rec)

    async def _emit(self, rec: TaskRecord) -> None:
        if self.on_status is None:
            return
        try:
            await self.on_status(rec.requestor, rec.wire())
        except Exception:
            log.exception("on_status hook failed for task %s", rec.task_id)

    async def transition(
        self, task_id: str, status: protocol.TaskStatus, **kw: Any
    ) -> TaskRecord | None:
        return await self.guard.transition(task_id, status, now=self.clock(), **kw)

    async def _expired(self, rec: TaskRecord) -> None:
        """Forget an expired task (R-TTL-3): tombstone, stop its work, wake its waiters."""
        self.tombstones.add(rec.requestor, rec.task_id)
        audit("expired", rec.requestor, rec.task_id, status=rec.status.value)
        self.runner.stop(rec.task_id, forget=True)

    async def lookup(self, task_id: str, ctx: RequestContext) -> TaskRecord:
        """The requestor's own live task, else ``TaskNotFound``/``TaskExpired`` (R-ERR-1,
        R-SEC-1, R-TTL-3)."""
        rec = await self.guard.get(task_id)
        if rec is None or rec.requestor != ctx.requestor:
            if (ctx.requestor, task_id) in self.tombstones:
                raise TaskExpired()
            # Another requestor's task is answered exactly like an unknown one (R-SEC-1).
            audit("lookup_rejected", ctx.requestor, task_id)
            raise TaskNotFound()
        expires = rec.expires_at
        if expires is not None and expires <= self.clock():
            if await self.guard.delete(task_id):
                await self._expired(rec)
            raise TaskExpired()
        return rec

    # ------------------------------------------------------------------ creating

    async def create_task(
        self,
        ctx: RequestContext,
        method: str,
        work: Work,
        *,
        task: Mapping[str, Any] | None = None,
        immediate_response: str | None = None,
        is_error_result: IsErrorResult | None = None,
    ) -> dict[str, Any]:
        """Accept a task-augmented request and start its work; return ``CreateTaskResult``
        wire JSON at once (R-CREATE-2). Raises only ``TaskError`` subclasses."""
        tg = self._tg
        if tg is None:
            raise InternalError(detail="the task engine is not running (use `async with engine`)")
        ttl = resolve_ttl(self.config, task)
        requestor = ctx.requestor
        limit = self.active_limit
        limit.acquire(requestor)
        try:
            limit.check(requestor, await self.guard.count_active(requestor))
            now = self.clock()
            rec = TaskRecord(
                task_id=secrets.token_urlsafe(16),  # 128 bits from `secrets` (R-ID-1, R-ID-2)
                requestor=requestor,
                method=method,
                status=protocol.INITIAL,  # R-STATE-1
                created_at=now,
                last_updated_at=now,
                ttl_ms=ttl,
                poll_interval_ms=self.config.poll_interval_ms,
            )
            run = Run(requestor)
            active = self.runner.active
            active[rec.task_id] = run
            try:
                await self.guard.create(rec)
            except TaskError:
                active.pop(rec.task_id, None)
                raise
        finally:
            limit.release(requestor)
        audit("created", requestor, rec.task_id, method=method, ttl=ttl)
        tc = TaskContext(self, rec.task_id, requestor, ctx.progress_token)
        self.runner.start(tg, rec, run, tc, work, is_error_result)
        out: dict[str, Any] = {"task": rec.wire()}
        if immediate_response is not None:
            out["_meta"] = {MODEL_IMMEDIATE_RESPONSE_KEY: immediate_response}  # R-CREATE-3
        return out

    # ------------------------------------------------------------------ expiry

    async def sweep(self) -> int:
        """Remove expired tasks now (R-TTL-3, R-SEC-4); returns how many. Costs O(expired)."""
        n = 0
        while True:
            batch = await self.guard.pop_expired(self.clock(), 1000)
            for rec in batch:
                await self._expired(rec)
            n += len(batch)
            if len(batch) < 1000:
                break
        for rec in await self.coordination.recover_on_sweep(self.clock()):
            await self.status_changed(rec)
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
        new = await self.transition(
            rec.task_id,
            protocol.CANCELLED,
            expected=protocol.NON_TERMINAL,
            status_message=message,
            error=cancelled_error(),
        )
        if new is None:
            return None
        audit("cancel_requested", rec.requestor, rec.task_id)
        self.runner.stop(rec.task_id)
        await self._emit(new)
        return new

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

    # ------------------------------------------------------------------ tasks/* handlers

    async def tasks_get(
        self, params: protocol.GetTaskParams, ctx: RequestContext
    ) -> protocol.GetTaskResult:
        self.rate.check(ctx.requestor)
        rec = await self.lookup(params.taskId, ctx)
        audit("retrieved", ctx.requestor, rec.task_id, status=rec.status.value)
        return protocol.GetTaskResult.model_validate(rec.wire())  # R-GET-3, R-META-3

    async def tasks_cancel(
        self, params: protocol.CancelTaskParams, ctx: RequestContext
    ) -> protocol.CancelTaskResult:
        self.rate.check(ctx.requestor)
        return protocol.CancelTaskResult.model_validate(await self._cancel(params.taskId, ctx))

    async def _cancel(self, task_id: str, ctx: RequestContext) -> dict[str, Any]:
        rec = await self.lookup(task_id, ctx)
        if rec.status in protocol.TERMINAL:
            raise TaskAlreadyTerminal(rec.status.value)  # R-CANCEL-1
        new = await self._cancel_record(rec, CANCELLED_MESSAGE)
        if new is None:  # it ended meanwhile
            now_rec = await self.lookup(task_id, ctx)
            raise TaskAlreadyTerminal(now_rec.status.value)
        return new.wire()

    async def tasks_list(
        self, params: protocol.ListTasksParams, ctx: RequestContext
    ) -> protocol.ListTasksResult:
        self.rate.check(ctx.requestor)
        return protocol.ListTasksResult.model_validate(await self._list(params.cursor, ctx))

    async def _list(self, cursor: str | None, ctx: RequestContext) -> dict[str, Any]:
        codec = await self.coordination.cursor_codec()
        after: tuple[float, str] | None = None
        if cursor is not None:
            try:
                after = codec.decode(ctx.requestor, cursor)
            except CursorError as exc:
                audit("cursor_rejected", ctx.requestor, None)
                raise InvalidCursor(
                    detail=f"params.cursor was not issued by this server for this requestor ({exc})"
                ) from None
        size = self.config.page_size
        recs = await self.guard.list_tasks(ctx.requestor, after=after, limit=size + 1)
        page = recs[:size]
        now = self.clock()
        out: dict[str, Any] = {
            "tasks": [r.wire() for r in page if r.expires_at is None or r.expires_at > now]
        }
        if len(recs) > size:  # R-LIST-1
            last = page[-1]
            out["nextCursor"] = codec.encode(ctx.requestor, last.created_at, last.task_id)
        return out

    async def tasks_result(
        self, params: protocol.GetTaskPayloadParams, ctx: RequestContext
    ) -> protocol.GetTaskPayloadResult:
        self.rate.check(ctx.requestor)
        return protocol.GetTaskPayloadResult.model_validate(
            await self._result(params.taskId, ctx, None)
        )

    async def _result(
        self, task_id: str, ctx: RequestContext, on_input: InputHandler | None
    ) -> dict[str, Any]:
        """Block until terminal (R-RESULT-2), delivering pending input requests meanwhile."""
        rec = await self.lookup(task_id, ctx)
        if rec.status not in protocol.TERMINAL:  # else no task group: the common case costs less
            rec = await await_terminal(self, task_id, ctx, on_input)
        audit("result_retrieved", ctx.requestor, task_id, status=rec.status.value)
        if rec.error is not None and rec.result is None:
            raise error_from_payload(rec.error)  # R-RESULT-1
        out = dict(rec.result or {})
        out["_meta"] = with_related_task(out.get("_meta"), task_id)  # R-RESULT-4
        return out

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
            if method == protocol.TASKS_RESULT and on_input is not None:
                model = DISPATCH[method][0]
                try:
                    parsed = model.model_validate(params or {})
                except ValidationError as exc:
                    raise InvalidParams(detail=describe_validation_error(exc)) from None
                self.rate.check(ctx.requestor)
                task_id = getattr(parsed, "taskId")  # noqa: B009
                res = await self._result(str(task_id), ctx, on_input)
                return dump(protocol.GetTaskPayloadResult.model_validate(res))
            return await self.dispatch(method, params, ctx)
        except TaskError:
            raise
        except Exception as exc:
            log.exception("tasks engine: %s failed", method)
            raise InternalError(detail=type(exc).__name__) from exc
