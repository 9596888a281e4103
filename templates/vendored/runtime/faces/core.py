"""``CoreTasks``: the default handler of the core face (protocol revision 2025-11-25, tasks
in the core protocol), built on a ``TaskEngine``.

A subclass of the generated ``core.handlers.TasksHandlerBase``: ``tasks/get``,
``tasks/result``, ``tasks/list``, ``tasks/cancel``, and the hook of every request that may be
task-augmented (``tools/call`` on a server; ``sampling/createMessage`` and
``elicitation/create`` on a client), each starting the request's work as a task. Subclass it
to change one rule and call ``super()``; write a handler from the generated base alone to
serve tasks from your own job system. The server (``McpTasks``) serves whichever it is given.

``CoreTasksMixin`` is the same behaviour on any package's bindings: put it before the
``TasksHandlerBase`` of a package you generated (``class Jobs(CoreTasksMixin,
userpkg.core.handlers.TasksHandlerBase)``) and its results are that package's classes (its
``RESULTS`` and ``CREATED``), so your ``isinstance`` checks hold.

Every translation between the protocol-neutral engine and this face's wire is here: the
engine's ``TaskRecord`` as the revision's ``Task`` (``ttl``, ``pollInterval``), the ``task``
param's ttl, the blocking ``tasks/result`` with the related-task ``_meta`` on the input
requests it delivers and on its results, and the status notification. It serves only tasks
it created (``TaskRecord.face``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel

from ... import protocol
from ..._handlers import NeedsStream
from ...core.handlers import AugmentedRequest, RequestContext, TasksHandlerBase
from ...core.meta import with_related_task
from ...errors import InvalidParams, TaskAlreadyTerminal, error_from_payload
from ...store import TaskRecord
from ..engine.limits import DEFAULT, Default
from ..engine.runs import InputHandler, PendingInput
from ..engine.task_engine import TaskEngine
from .common import result_builders, start_work, task_json, wire_ready

__all__ = [
    "FACE",
    "CoreTasks",
    "CoreTasksMixin",
    "requested_ttl",
    "stamped",
]

#: The face's name: the revision it speaks (``TaskRecord.face`` of the tasks it creates).
FACE: str = protocol.REVISION
#: The hooks of the requests that may become a task (each one's body is ``start``).
_HOOKS = ("tools_call_task", "sampling_create_message_task", "elicitation_create_task")
#: The requests whose results the wire variants build (``CoreTasksMixin.wire_ready``).
_WIRE_RESULTS = (
    protocol.TASKS_GET, protocol.TASKS_CANCEL, protocol.TASKS_LIST, protocol.TASKS_RESULT
)  # fmt: skip


def requested_ttl(task: Any) -> int | None | Default:
    """The ttl a request's validated ``task`` param asks for (R-TTL-2): ``DEFAULT`` when
    absent, ``None`` for unlimited, else a non-negative integer (the engine applies its
    policy)."""
    if "ttl" not in task.model_fields_set:
        return DEFAULT
    ttl: int | None = task.ttl
    if ttl is not None and ttl < 0:
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


def _deliverer(ctx: RequestContext) -> InputHandler | None:
    """The request's own stream as the engine's input handler (R-INPUT-3), stamping the
    related-task ``_meta`` on each request (R-INPUT-2); None without a stream."""
    send = ctx.send_request
    if send is None:
        return None

    async def deliver(p: PendingInput) -> dict[str, Any]:
        request = stamped(p)
        return await send(request.method, request.params)

    return deliver


class CoreTasksMixin:
    """The core face's ``tasks/*`` requests and task creation over a ``TaskEngine``, on the
    bindings of the ``TasksHandlerBase`` it is mixed into (before it).

    Its requests and contexts are typed ``Any``: they are the classes of whichever generated
    package the base comes from, so a subclass on its own bindings overrides these methods
    with that package's types (and ``super()`` calls return that package's models)."""

    results: ClassVar[Mapping[str, Any]]
    created: ClassVar[type[BaseModel]]
    #: The wire variants dispatch calls while the typed methods are not overridden, on this
    #: package's own bindings (``HandlerBase.wire_variants``, :meth:`wire_ready`).
    wire_variants: ClassVar[Mapping[str, tuple[str, tuple[str, ...]]]] = {
        **{hook: ("_created_wire", (hook, "start")) for hook in _HOOKS},
        "tasks_get": ("_tasks_get_wire", ("tasks_get",)),
        "tasks_cancel": ("_tasks_cancel_wire", ("tasks_cancel",)),
        "tasks_list": ("_tasks_list_wire", ("tasks_list",)),
        "tasks_result": ("_tasks_result_wire", ("tasks_result",)),
    }

    @classmethod
    def wire_ready(cls) -> bool:
        """Whether the wire variants answer as the typed methods would (:func:`.wire_ready`)."""
        return wire_ready(cls, TasksHandlerBase, _WIRE_RESULTS)

    def __init__(self, engine: TaskEngine) -> None:
        self.engine = engine
        self._build = result_builders(self.results)
        #: task id -> how many ``tasks/result`` calls wait with a stream to carry its input
        #: requests (none: the server may push them on the requestor's standalone channel)
        self.carrying: dict[str, int] = {}

    # ------------------------------------------------------------------ starting tasks
    async def start(self, request: Any, ctx: Any) -> Any:
        """Store a task for ``request`` and start its ``work``; ``CreateTaskResult`` at once
        (R-CREATE-2). The body of every hook of this handler."""
        return self.created.model_validate(await self._created_wire(request, ctx))

    async def _created_wire(self, request: Any, ctx: Any) -> dict[str, Any]:
        ttl = requested_ttl(request.task)
        rec = await start_work(  # R-STATE-4: an isError result ends failed
            self.engine, request, ctx, FACE, tool_error=protocol.FAILED, ttl_ms=ttl
        )
        return {"task": task_json(rec)}

    async def tools_call_task(self, request: Any, ctx: Any) -> Any:
        return await self.start(request, ctx)

    async def sampling_create_message_task(self, request: Any, ctx: Any) -> Any:
        return await self.start(request, ctx)

    async def elicitation_create_task(self, request: Any, ctx: Any) -> Any:
        return await self.start(request, ctx)

    # ------------------------------------------------------------------ tasks/*
    async def tasks_get(self, params: Any, ctx: Any) -> Any:
        return self._build[protocol.TASKS_GET](await self._tasks_get_wire(params, ctx))

    async def _tasks_get_wire(self, params: Any, ctx: Any) -> dict[str, Any]:
        rec = await self.engine.record(ctx.requestor, params.taskId, face=FACE)
        return task_json(rec)  # R-GET-3, R-META-3

    async def tasks_cancel(self, params: Any, ctx: Any) -> Any:
        return self._build[protocol.TASKS_CANCEL](await self._tasks_cancel_wire(params, ctx))

    async def _tasks_cancel_wire(self, params: Any, ctx: Any) -> dict[str, Any]:
        rec, moved = await self.engine.cancel(ctx.requestor, params.taskId, face=FACE)
        if not moved:
            raise TaskAlreadyTerminal(rec.status.value)  # R-CANCEL-1
        return task_json(rec)

    async def tasks_list(self, params: Any, ctx: Any) -> Any:
        return self._build[protocol.TASKS_LIST](await self._tasks_list_wire(params, ctx))

    async def _tasks_list_wire(self, params: Any, ctx: Any) -> dict[str, Any]:
        recs, cursor = await self.engine.list_page(ctx.requestor, params.cursor, face=FACE)
        out: dict[str, Any] = {"tasks": [task_json(r) for r in recs]}
        if cursor is not None:  # R-LIST-1
            out["nextCursor"] = cursor
        return out

    async def tasks_result(self, params: Any, ctx: Any) -> Any:
        """Block until terminal (R-RESULT-2), delivering the task's input requests on the
        request's own stream meanwhile (R-INPUT-3). Without a stream (``ctx.send_request``
        None) a task that asks for input raises :class:`NeedsStream`: a front door with one
        answers the request. While one waits with a stream, :attr:`carrying` counts it (the
        server then pushes none of the task's questions elsewhere: ``mcp_input_push``)."""
        return self._build[protocol.TASKS_RESULT](await self._tasks_result_wire(params, ctx))

    async def _tasks_result_wire(self, params: Any, ctx: Any) -> dict[str, Any]:
        deliver, task_id = _deliverer(ctx), params.taskId
        carrying = self.carrying
        if deliver is not None:
            carrying[task_id] = carrying.get(task_id, 0) + 1
        try:
            rec = await self.engine.wait_terminal(
                ctx.requestor,
                task_id,
                deliver,
                face=FACE,
                until_input=deliver is None,
            )
        finally:
            if deliver is not None:
                left = carrying.pop(task_id, 1) - 1
                if left:
                    carrying[task_id] = left
        if rec.status not in protocol.TERMINAL:
            raise NeedsStream(f"task {params.taskId} asks for input (R-INPUT-3)")
        return result_payload(rec)

    # ------------------------------------------------------------------ notifications
    def status_notification(self, rec: TaskRecord) -> tuple[str, dict[str, Any]]:
        """``notifications/tasks/status`` of a status change: the whole Task, no
        related-task ``_meta`` (R-NOTIFY-1, R-NOTIFY-3)."""
        return protocol.NOTIFICATIONS_TASKS_STATUS, task_json(rec)


class CoreTasks(CoreTasksMixin, TasksHandlerBase):
    """The default handler of the core face, on this package's bindings (typed with its
    models: a subclass's ``super()`` calls return them)."""

    if TYPE_CHECKING:  # the mixin's methods as typed with these bindings; no wrapper at run time

        async def tools_call_task(
            self, request: AugmentedRequest[protocol.TaskMetadata], ctx: RequestContext
        ) -> protocol.CreateTaskResult: ...

        async def tasks_get(
            self, params: protocol.GetTaskParams, ctx: RequestContext
        ) -> protocol.GetTaskResult: ...

        async def tasks_cancel(
            self, params: protocol.CancelTaskParams, ctx: RequestContext
        ) -> protocol.CancelTaskResult: ...

        async def tasks_list(
            self, params: protocol.ListTasksParams, ctx: RequestContext
        ) -> protocol.ListTasksResult: ...

        async def tasks_result(
            self, params: protocol.GetTaskPayloadParams, ctx: RequestContext
        ) -> protocol.GetTaskPayloadResult: ...
