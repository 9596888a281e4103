"""``ExtensionTasks``: the default handler of the extension face (the tasks extension
``io.modelcontextprotocol/tasks`` of 2026-07-28), built on a ``TaskEngine``.

A subclass of the generated ``extension.handlers.TasksHandlerBase``. Same engine, same store,
limits, ttl policy, rate limit, audit and isolation as the core face (``core.py``, sharing :mod:`.common`); only
the wire differs (the facts and models come from the generated ``extension`` subpackage):

- a task is flat: ``ttlMs`` and ``pollIntervalMs`` instead of ``ttl`` and ``pollInterval``;
  the create answer is the task itself with ``resultType: "task"`` (X-TASK-1, X-RT-1);
- ``tasks/get`` inlines the outcome: ``result`` when completed, ``error`` when failed,
  ``inputRequests`` (key -> request, the engine's keys: unique for the task's life, X-UPD-5)
  when input is required; a tool result with ``isError`` ends ``completed`` (X-ERR-4);
- ``tasks/update`` answers outstanding input requests by key; keys that are not outstanding
  are ignored without reading their values (X-UPD-7, A-9), the answered ones are gone from
  the very next ``tasks/get`` (read-your-writes, A-10); the ack is ``{resultType:
  "complete"}`` (X-UPD-9);
- ``tasks/cancel`` is an ack, the same for a task that is already terminal (X-CAN-8);
- no ``tasks/result``, no ``tasks/list`` (``-32601``: not in the dispatch table);
- every ``tasks/*`` request must declare the extension in its own ``_meta`` capability
  envelope, checked before its params are read (``-32021``, X-CAP-9, X-ERR-5), and an
  ``Mcp-Name`` routing header, when sent, must equal ``params.taskId`` (``-32020``,
  X-HTTP-4; checked before the lookup).

No status notifications: the ``mcp`` SDK's ``subscriptions/listen`` has no ``taskIds``
filter to hang ``notifications/tasks`` on (X-NOTIF-1 is optional); clients poll.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Any, ClassVar, Final

from pydantic import BaseModel, TypeAdapter, ValidationError, create_model

from ... import protocol
from ..._handlers import ROUTING_NAME, dump
from ...core.handlers import RequestContext
from ...errors import HeaderMismatch, InternalError, InvalidParams, describe_validation_error
from ...extension import models
from ...extension import protocol as ext
from ...extension.handlers import AugmentedRequest, NoParams, TasksHandlerBase
from ...store import TaskRecord
from ..engine.runs import TaskView
from ..engine.task_engine import TaskEngine
from .common import result_builders, start_work, task_json, wire_ready

__all__ = [
    "FACE",
    "MAX_INPUT_RESPONSES",
    "ROUTING_NAME",
    "ExtensionTasks",
    "extension_task_json",
]

#: The face's name (``TaskRecord.face`` of the tasks it creates): the revision it speaks,
#: a key of ``protocol.FACES`` like the core face's.
FACE: Final = ext.REVISION
#: The most ``inputResponses`` entries one ``tasks/update`` may carry (bad input otherwise).
MAX_INPUT_RESPONSES: Final = 256
#: The engine's status of a tool result with ``isError`` on this face (X-ERR-4).
TOOL_ERROR: Final = next(s for s in protocol.STATUSES if s.value == ext.TOOL_ERROR_STATUS.value)
#: The requests whose results the wire variants build (``ExtensionTasksMixin.wire_ready``).
_WIRE_RESULTS: Final = (ext.TASKS_GET, ext.TASKS_UPDATE, ext.TASKS_CANCEL)

_INPUT_RESPONSE: TypeAdapter[Any] = TypeAdapter(models.InputResponse)


@cache
def lenient_update(params: type[BaseModel]) -> type[BaseModel]:
    """A bindings' ``tasks/update`` params model with the values left unread: only the values
    under outstanding keys are validated, by the handler (X-UPD-7, A-9)."""
    if getattr(params, _LENIENT, False):
        return params
    model: type[BaseModel] = create_model(
        params.__name__, __base__=params, inputResponses=(dict[str, Any], ...)
    )
    setattr(model, _LENIENT, True)
    return model


_LENIENT = "__mcptask_lenient_inputs__"
#: This package's ``tasks/update`` params as the default handler reads them.
UpdateParams: Final = lenient_update(models.UpdateTaskRequestParams)


def extension_task_json(rec: TaskRecord) -> dict[str, Any]:
    """The task's common fields on this face (``Task``: ``ttlMs``, ``pollIntervalMs``)."""
    return task_json(rec, ttl="ttlMs", poll_interval="pollIntervalMs")


def detailed(view: TaskView) -> dict[str, Any]:
    """``tasks/get``'s answer: the task with its outcome or its input requests inlined
    (X-GET-*), no related-task ``_meta`` anywhere (the result is the tool's own)."""
    rec = view.record
    out = extension_task_json(rec)
    out["resultType"] = ext.RESULT_TYPE_COMPLETE
    if rec.status == protocol.COMPLETED:
        out["result"] = dict(rec.result or {})
    elif rec.status == protocol.FAILED:
        out["error"] = dict(rec.error or InternalError(detail="the task failed").to_error())
    elif rec.status == protocol.INPUT_REQUIRED:
        out["inputRequests"] = {
            i.key: {"method": i.method, "params": i.params} for i in view.inputs
        }
    return out


def check_routing_name(task_id: str, ctx: RequestContext) -> None:
    """X-HTTP-4: the ``Mcp-Name`` header, when sent, names the task of the body (a missing
    header is tolerated: A-19)."""
    name = ctx.extra.get(ROUTING_NAME)
    if name is not None and name != task_id:
        raise HeaderMismatch(
            detail=f"the {ext.ROUTING_NAME_HEADER} header does not match"
            f" params.{ext.ROUTING_NAME_PARAM}"
        )


class ExtensionTasksMixin:
    """The extension's ``tasks/*`` requests and task creation over a ``TaskEngine``, on the
    bindings of the ``TasksHandlerBase`` it is mixed into (before it): ``class
    Jobs(ExtensionTasksMixin, userpkg.extension.handlers.TasksHandlerBase)``. Its requests
    and contexts are typed ``Any``, as :class:`~.core.CoreTasksMixin`'s are."""

    requests: ClassVar[Mapping[str, tuple[type[BaseModel], str]]]
    results: ClassVar[Mapping[str, Any]]
    created: ClassVar[type[BaseModel]]
    #: The wire variants dispatch calls while the typed methods are not overridden, on this
    #: package's own bindings (``HandlerBase.wire_variants``, :meth:`wire_ready`).
    wire_variants: ClassVar[Mapping[str, tuple[str, tuple[str, ...]]]] = {
        "tools_call_task": ("_created_wire", ("tools_call_task",)),
        "tasks_get": ("_tasks_get_wire", ("tasks_get",)),
        "tasks_update": ("_tasks_update_wire", ("tasks_update",)),
        "tasks_cancel": ("_tasks_cancel_wire", ("tasks_cancel",)),
    }

    @classmethod
    def wire_ready(cls) -> bool:
        """Whether the wire variants answer as the typed methods would (:func:`.wire_ready`)."""
        return wire_ready(cls, TasksHandlerBase, _WIRE_RESULTS)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        model, name = cls.requests[ext.TASKS_UPDATE]
        cls.requests = {**cls.requests, ext.TASKS_UPDATE: (lenient_update(model), name)}

    def __init__(self, engine: TaskEngine) -> None:
        self.engine = engine
        self._build = result_builders(self.results)

    async def tools_call_task(self, request: Any, ctx: Any) -> Any:
        """Store the task and start its work; the flat ``CreateTaskResult`` once ``tasks/get``
        finds it (X-CREATE-3). The ttl is the server's policy (none is asked on this face)."""
        return self.created.model_validate(await self._created_wire(request, ctx))

    async def _created_wire(self, request: Any, ctx: Any) -> dict[str, Any]:
        rec = await start_work(self.engine, request, ctx, FACE, tool_error=TOOL_ERROR)
        out = extension_task_json(rec)
        out["resultType"] = ext.RESULT_TYPE_TASK
        return out

    async def tasks_get(self, params: Any, ctx: Any) -> Any:
        return self._build[ext.TASKS_GET](await self._detailed(params, ctx))

    async def holds(self, requestor: str, task_id: str) -> bool | None:
        """Whether ``tasks/get`` may find ``task_id`` for ``requestor``, told without it:
        False when the engine holds no such task of the requestor's on this face (an unknown
        id costs a lookup, nothing counted); None when ``tasks_get`` is overridden, which
        may find tasks elsewhere (ask it)."""
        if self._wire("tasks_get") is None:  # type: ignore[attr-defined]
            return None
        return await self.engine.holds(requestor, task_id, face=FACE)

    async def _detailed(self, params: Any, ctx: Any) -> dict[str, Any]:
        check_routing_name(params.taskId, ctx)
        view = await self.engine.view(ctx.requestor, params.taskId, face=FACE)
        return detailed(view)

    async def _tasks_get_wire(self, params: Any, ctx: Any) -> dict[str, Any]:
        out = await self._detailed(params, ctx)
        if out["status"] == protocol.INPUT_REQUIRED.value:
            # the work's own input requests: checked against their models, as tasks_get does
            return dump(self._build[ext.TASKS_GET](out))
        return out

    async def tasks_update(self, params: Any, ctx: Any) -> Any:
        return self._build[ext.TASKS_UPDATE](await self._tasks_update_wire(params, ctx))

    async def _tasks_update_wire(self, params: Any, ctx: Any) -> dict[str, Any]:
        check_routing_name(params.taskId, ctx)
        responses = params.inputResponses
        if len(responses) > MAX_INPUT_RESPONSES:
            raise InvalidParams(
                detail=f"params.inputResponses: {len(responses)} entries"
                f" (at most {MAX_INPUT_RESPONSES})"
            )
        view = await self.engine.view(ctx.requestor, params.taskId, face=FACE)
        rec = view.record
        if rec.status in protocol.TERMINAL and responses:
            raise InvalidParams(
                detail=f"params.taskId: the task is {rec.status.value}; it takes no more input"
            )
        outstanding = {i.key for i in view.inputs}
        answers: dict[str, Mapping[str, Any]] = {}
        for key in sorted(responses.keys() & outstanding):
            value = responses[key]
            try:
                _INPUT_RESPONSE.validate_python(value)
            except ValidationError as exc:
                where = f"params.inputResponses.{key}"
                raise InvalidParams(detail=describe_validation_error(exc, where)) from None
            answers[key] = value
        if answers:
            await self.engine.answer(ctx.requestor, params.taskId, answers, face=FACE)
        return {"resultType": ext.RESULT_TYPE_COMPLETE}

    async def tasks_cancel(self, params: Any, ctx: Any) -> Any:
        return self._build[ext.TASKS_CANCEL](await self._tasks_cancel_wire(params, ctx))

    async def _tasks_cancel_wire(self, params: Any, ctx: Any) -> dict[str, Any]:
        check_routing_name(params.taskId, ctx)
        await self.engine.cancel(ctx.requestor, params.taskId, face=FACE)  # terminal: the same ack
        return {"resultType": ext.RESULT_TYPE_COMPLETE}

    def status_notification(self, rec: TaskRecord) -> tuple[str, dict[str, Any]] | None:
        """No notification channel on this face yet (see the module's docstring)."""
        return None


class ExtensionTasks(ExtensionTasksMixin, TasksHandlerBase):
    """The default handler of the extension's face, on this package's bindings (typed with its
    models: a subclass's ``super()`` calls return them)."""

    if TYPE_CHECKING:  # the mixin's methods as typed with these bindings; no wrapper at run time

        async def tools_call_task(
            self, request: AugmentedRequest[NoParams], ctx: RequestContext
        ) -> models.CreateTaskResult: ...

        async def tasks_get(
            self, params: models.GetTaskRequestParams, ctx: RequestContext
        ) -> models.GetTaskResult: ...

        async def tasks_update(
            self, params: models.UpdateTaskRequestParams, ctx: RequestContext
        ) -> models.UpdateTaskResult: ...

        async def tasks_cancel(
            self, params: models.CancelTaskRequestParams, ctx: RequestContext
        ) -> models.CancelTaskResult: ...
