"""The 2025-11-25 face: every translation between the protocol-neutral engine and the
wire of the revision the generated ``protocol`` module describes (tasks in the core
protocol: ``task`` params, ``CreateTaskResult``, blocking ``tasks/result``, ``tasks/list``,
``notifications/tasks/status``).

The engine (``engine.py``, ``runs.py``, the stores) knows tasks, not wire formats; this
module turns its ``TaskRecord`` into the revision's ``Task`` (``ttl``, ``pollInterval``),
reads the ``task`` param's ttl, answers the ``tasks/*`` requests, stamps the related-task
``_meta`` on input requests delivered on the ``tasks/result`` stream and on its results,
and renders status notifications. It serves only tasks it created (``TaskRecord.face``).

``TaskEngine`` makes one (``engine.v2025``) and keeps serving these methods itself
(``engine.handle``, ``engine.dispatch``, ``engine.create_task``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from .. import protocol
from ..errors import (
    InternalError,
    InvalidParams,
    TaskAlreadyTerminal,
    TaskError,
    describe_validation_error,
    error_from_payload,
)
from ..handlers import DISPATCH, RequestContext, TasksHandlerBase, dump
from ..meta import MODEL_IMMEDIATE_RESPONSE_KEY, with_related_task
from ..store import TaskRecord, rfc3339
from .limits import DEFAULT, Default
from .runs import InputHandler, IsErrorResult, PendingInput, Work

if TYPE_CHECKING:
    from .engine import TaskEngine

__all__ = ["FACE", "Face2025", "requested_ttl", "stamped", "task_json", "to_task"]

#: The face's name: the revision it speaks (``TaskRecord.face`` of the tasks it creates).
FACE: str = protocol.REVISION


def task_json(
    rec: TaskRecord, *, ttl: str = "ttl", poll_interval: str = "pollInterval"
) -> dict[str, Any]:
    """The task as wire JSON (the fields of ``Task``); hot on every ``tasks/get``. The
    tasks extension names two of the fields otherwise (``ttlMs``, ``pollIntervalMs``)."""
    out: dict[str, Any] = {
        "taskId": rec.task_id,
        "status": rec.status.value,
        "createdAt": rfc3339(rec.created_at),
        "lastUpdatedAt": rfc3339(rec.last_updated_at),
        ttl: rec.ttl_ms,
    }
    if rec.poll_interval_ms is not None:
        out[poll_interval] = rec.poll_interval_ms
    if rec.status_message is not None:
        out["statusMessage"] = rec.status_message
    return out


def to_task(rec: TaskRecord) -> protocol.Task:
    """The task as the generated ``Task`` model."""
    return protocol.Task.model_validate(task_json(rec))


def requested_ttl(task: Mapping[str, Any] | None) -> int | None | Default:
    """The ttl a request's ``task`` param asks for (R-TTL-2): ``DEFAULT`` when absent,
    ``None`` for unlimited, else a non-negative integer (the engine applies its policy)."""
    if task is None:
        return DEFAULT
    if not isinstance(task, Mapping):
        raise InvalidParams(detail="params.task: must be an object")
    if "ttl" not in task:
        return DEFAULT
    ttl = task["ttl"]
    if ttl is None:
        return None
    if isinstance(ttl, float) and math.isfinite(ttl) and ttl.is_integer():
        ttl = int(ttl)
    if isinstance(ttl, bool) or not isinstance(ttl, int):
        raise InvalidParams(detail="params.task.ttl: must be an integer number of milliseconds")
    if ttl < 0:
        raise InvalidParams(detail="params.task.ttl: must not be negative")
    return ttl


def stamped(p: PendingInput) -> PendingInput:
    """An input request as the ``tasks/result`` stream sends it: with the related-task
    ``_meta`` (R-INPUT-2)."""
    params = dict(p.params)
    params["_meta"] = with_related_task(p.params.get("_meta"), p.task_id)
    return replace(p, params=params)


def result_payload(rec: TaskRecord) -> dict[str, Any]:
    """``tasks/result`` of a terminal task: its result with the related-task ``_meta``
    (R-RESULT-4), or its stored error raised (R-RESULT-1)."""
    if rec.error is not None and rec.result is None:
        raise error_from_payload(rec.error)
    out = dict(rec.result or {})
    out["_meta"] = with_related_task(out.get("_meta"), rec.task_id)
    return out


class Face2025(TasksHandlerBase):
    """The ``tasks/*`` handlers and task creation of this revision over a ``TaskEngine``."""

    face = FACE

    def __init__(self, engine: TaskEngine) -> None:
        self.engine = engine

    async def notify_status(self, rec: TaskRecord) -> None:
        """A status change as ``engine.on_status(requestor, Task JSON)`` (R-NOTIFY-1: the
        whole Task, no related-task ``_meta``, R-NOTIFY-3)."""
        hook = self.engine.on_status
        if hook is not None:
            await hook(rec.requestor, task_json(rec))

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
        rec = await self.engine.create(
            ctx.requestor,
            FACE,
            method,
            work,
            ttl_ms=requested_ttl(task),
            tool_error=protocol.FAILED,  # R-STATE-4
            progress_token=ctx.progress_token,
            is_error_result=is_error_result,
        )
        out: dict[str, Any] = {"task": task_json(rec)}
        if immediate_response is not None:
            out["_meta"] = {MODEL_IMMEDIATE_RESPONSE_KEY: immediate_response}  # R-CREATE-3
        return out

    async def tasks_get(
        self, params: protocol.GetTaskParams, ctx: RequestContext
    ) -> protocol.GetTaskResult:
        rec = await self.engine.record(ctx.requestor, params.taskId, face=FACE)
        return protocol.GetTaskResult.model_validate(task_json(rec))  # R-GET-3, R-META-3

    async def tasks_cancel(
        self, params: protocol.CancelTaskParams, ctx: RequestContext
    ) -> protocol.CancelTaskResult:
        rec, moved = await self.engine.cancel(ctx.requestor, params.taskId, face=FACE)
        if not moved:
            raise TaskAlreadyTerminal(rec.status.value)  # R-CANCEL-1
        return protocol.CancelTaskResult.model_validate(task_json(rec))

    async def tasks_list(
        self, params: protocol.ListTasksParams, ctx: RequestContext
    ) -> protocol.ListTasksResult:
        recs, cursor = await self.engine.list_page(ctx.requestor, params.cursor, face=FACE)
        out: dict[str, Any] = {"tasks": [task_json(r) for r in recs]}
        if cursor is not None:  # R-LIST-1
            out["nextCursor"] = cursor
        return protocol.ListTasksResult.model_validate(out)

    async def tasks_result(
        self, params: protocol.GetTaskPayloadParams, ctx: RequestContext
    ) -> protocol.GetTaskPayloadResult:
        return protocol.GetTaskPayloadResult.model_validate(
            await self._result(params.taskId, ctx, None)
        )

    async def _result(
        self, task_id: str, ctx: RequestContext, on_input: InputHandler | None
    ) -> dict[str, Any]:
        """Block until terminal (R-RESULT-2), delivering pending input requests meanwhile
        with the related-task ``_meta`` (R-INPUT-2, R-INPUT-3)."""
        deliver: InputHandler | None = None
        if on_input is not None:
            send = on_input

            async def deliver_stamped(p: PendingInput) -> dict[str, Any]:
                return await send(stamped(p))

            deliver = deliver_stamped
        rec = await self.engine.wait_terminal(ctx.requestor, task_id, deliver, face=FACE)
        return result_payload(rec)

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
                task_id = getattr(parsed, "taskId")  # noqa: B009
                res = await self._result(str(task_id), ctx, on_input)
                return dump(protocol.GetTaskPayloadResult.model_validate(res))
            return await self.dispatch(method, params, ctx)
        except TaskError:
            raise
        except Exception as exc:
            self.engine.log.exception("tasks engine: %s failed", method)
            raise InternalError(detail=type(exc).__name__) from exc
