"""The tasks extension ``io.modelcontextprotocol/tasks`` (2026-07-28) on an ``mcp`` server,
beside the 2025-11-25 face, in the same :class:`~.mcp_server.McpTasks`.

``McpTasks`` makes one :class:`ExtensionServing` when the package carries the extension's
bindings; it advertises the extension in ``server/discover`` (``Server.extensions``,
X-CAP-2) and hands it every request of the extension's revision: ``tools/call`` from the
middleware and ``tasks/*`` from the one handler per method name both faces share. The
engine, the store, the limits and the ``task_support`` map are the same for both faces.

``tools/call`` on this face (X-CAP-*, X-CREATE-*): a tool the map marks ``optional`` or
``required`` becomes a task only when the request declares the extension in its own
``_meta`` envelope (X-CAP-1, X-CAP-5; never inferred from earlier requests); a ``required``
tool called without it gets ``-32021`` with ``data.requiredCapabilities`` (X-CAP-8); the
legacy ``task`` param is ignored (X-CREATE-5). A tool declared ``gather_first`` (its inputs
come from SDK resolvers such as ``Elicit``) answers its ``input_required`` round before
the task exists: the call without ``inputResponses`` runs inline (X-MRTR-1).

The work runs the SDK's own pipeline in the background with a task-scoped session
(:class:`PollOutbound`): the tool's elicitation/sampling requests become the task's
``inputRequests``, answered by ``tasks/update``. Progress and log notifications have no
channel on this face and are dropped.

Owner (X-SEC-1, X-SEC-2): the bearer token's subject when auth gives one; else there is no
session on this stateless face and every task is owned by ``"anonymous"``: the unguessable
128-bit task id is then what guards a task.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import decode_header_value
from pydantic import BaseModel, ValidationError

from ..errors import InternalError, MethodNotFound, TaskError
from ..extension import protocol as ext
from ..extension.handlers import DECLARED
from ..handlers import RequestContext
from ._sdk import (
    from_sdk_error,
    task_session,
    to_sdk_error,
    tool_call_params,
    validation_error,
)
from .engine import TaskContext
from .face_ext import ROUTING_NAME, FaceExt
from .mcp_outbound import INPUT_METHODS, TaskDispatchContext
from .mcp_server import ANONYMOUS  # the owner of every task here when auth gives none

if TYPE_CHECKING:
    from .mcp_server import McpTasks, RunTool

__all__ = ["ANONYMOUS", "ExtensionServing", "PollOutbound"]

_NAME_HEADER = ext.ROUTING_NAME_HEADER.lower()
_SERVES = frozenset({ext.TASK_SUPPORT_OPTIONAL, ext.TASK_SUPPORT_REQUIRED})
#: ``resultType`` of an MRTR input round (the SDK's ``InputRequiredResult``)
_INPUT_ROUND = types.InputRequiredResult.model_fields["result_type"].default


class PollOutbound(TaskDispatchContext):
    """Duck-types ``mcp.shared.dispatcher.DispatchContext`` for a tool running in a task of
    this face: its elicitation/sampling/roots requests become the task's pending input
    (``inputRequests``, X-UPD-1), with the tool's own params (no related-task ``_meta``)."""

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: Any = None
    ) -> dict[str, Any]:
        if method not in INPUT_METHODS:
            raise to_sdk_error(MethodNotFound(detail=f"{method} cannot be sent from a task"))
        try:
            return await self.tctx.request_input(method, dict(params or {}))
        except TaskError as exc:
            raise to_sdk_error(exc) from None

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: Any = None) -> None:
        return None  # no notification channel for a task on this face

    async def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        return None


def _wire(result: Any) -> dict[str, Any]:
    if isinstance(result, BaseModel):
        dumped: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        return dumped
    return dict(result or {})


class ExtensionServing:
    """The extension's face on one ``McpTasks`` (see the module's docstring)."""

    revision = ext.REVISION
    #: the ``tasks/*`` methods this face serves (the removed ones answer -32601 anyway)
    methods = ext.TASK_REQUEST_METHODS

    def __init__(self, tasks: McpTasks) -> None:
        self.tasks = tasks
        self.face = tasks.engine.add_face(FaceExt(tasks.engine))
        #: tools whose MRTR input round comes before the task (X-MRTR-1)
        self.gather_first: set[str] = set()
        tasks.server.extensions[ext.EXTENSION_ID] = {}  # server/discover (X-CAP-2)

    def speaks(self, ctx: ServerRequestContext[Any, Any]) -> bool:
        return ctx.protocol_version == ext.REVISION

    #: the ``tasks/*`` methods the lean path answers on this face
    lean_methods = frozenset({ext.TASKS_GET, ext.TASKS_UPDATE, ext.TASKS_CANCEL})

    def requestor(self, ctx: ServerRequestContext[Any, Any] | None = None) -> str:
        """The owner of the request being served (X-SEC-1, X-SEC-2): its bearer token's
        subject, else ``ANONYMOUS`` (no session on this stateless face)."""
        return self.tasks.http_requestor(None)

    @staticmethod
    def _meta(ctx: ServerRequestContext[Any, Any]) -> Mapping[str, Any] | None:
        meta = ctx.params.get("_meta") if isinstance(ctx.params, Mapping) else None
        return meta if isinstance(meta, Mapping) else None

    def _context(self, ctx: ServerRequestContext[Any, Any]) -> RequestContext:
        headers = getattr(ctx.request, "headers", None)
        return self.context_of(self.requestor(ctx), ctx.request_id, self._meta(ctx), headers)

    @staticmethod
    def context_of(
        requestor: str,
        request_id: str | int | None,
        meta: Mapping[str, Any] | None,
        headers: Mapping[str, str] | None,
    ) -> RequestContext:
        """The engine's view of a request of this face (the ``Mcp-Name`` routing header in
        ``extra``, checked against the params by the face)."""
        extra: dict[str, Any] = {}
        if headers is not None and _NAME_HEADER in headers:
            extra[ROUTING_NAME] = decode_header_value(headers[_NAME_HEADER])
        return RequestContext(requestor=requestor, request_id=request_id, meta=meta, extra=extra)

    def serves_task(self, name: str, meta: Mapping[str, Any] | None, has_inputs: bool) -> bool:
        """Whether a ``tools/call`` of tool ``name`` becomes a task on this face: the tool
        may run as one, the request declares the extension (X-CAP-1, X-CAP-5), and it is
        not a ``gather_first`` tool's input round (X-MRTR-1)."""
        if self.tasks.task_support.get(name) not in _SERVES or not DECLARED.declared(meta):
            return False
        return has_inputs or name not in self.gather_first

    # ------------------------------------------------------------------ tasks/*
    async def handle(self, method: str, ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
        """A ``tasks/*`` request: ``-32601`` for the removed 2025-11-25 methods (X-COMPAT-4),
        else the capability gate, the params, the routing header, the engine."""
        try:
            return await self.face.dispatch(method, ctx.params, self._context(ctx))
        except TaskError:
            raise
        except Exception as exc:
            self.tasks.engine.log.exception("tasks extension: %s failed", method)
            raise InternalError(detail=type(exc).__name__) from exc

    # ------------------------------------------------------------------ tools/call
    async def tools_call(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        raw, parsed = tool_call_params(ctx.params)
        params = {k: v for k, v in raw.items() if k != "task"}  # X-CREATE-5
        plain = dataclasses.replace(ctx, params=params)
        support = self.tasks.task_support.get(parsed.name)
        if support not in _SERVES:
            return await call_next(plain)
        if not DECLARED.declared(self._meta(ctx)):
            if support == ext.TASK_SUPPORT_REQUIRED:
                raise self.face.missing_capability()  # X-CAP-8
            return await call_next(plain)  # X-CAP-5: no task to a non-declaring request
        if parsed.name in self.gather_first and not parsed.input_responses:
            return await call_next(plain)  # its input round, before any task (X-MRTR-1)
        return await self._start(ctx, call_next, params)

    async def _start(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext, params: dict[str, Any]
    ) -> dict[str, Any]:
        session = ctx.session
        conn = Connection.from_envelope(
            ctx.protocol_version,
            None,
            (
                session.client_capabilities.model_dump(by_alias=True, exclude_none=True)
                if session.client_capabilities is not None
                else None
            ),
        )

        async def run(dctx: Any, call_params: dict[str, Any]) -> HandlerResult:
            scoped = task_session(dctx, conn)
            task_ctx = dataclasses.replace(ctx, params=call_params, session=scoped, request=None)
            return await call_next(task_ctx)

        return await self.start(self.requestor(ctx), run, params)

    async def start(self, requestor: str, run: RunTool, params: dict[str, Any]) -> dict[str, Any]:
        """Create a task whose tool ``run(dctx, params)`` runs in the background with the
        task-scoped outbound ``dctx`` (:class:`PollOutbound`); the flat ``CreateTaskResult``."""

        async def work(tctx: TaskContext) -> dict[str, Any]:
            try:
                result = await run(PollOutbound(tctx), params)
            except MCPError as exc:
                raise from_sdk_error(exc) from None
            except ValidationError as exc:
                raise validation_error(exc) from None
            out = _wire(result)
            if out.get("resultType") == _INPUT_ROUND:  # MRTR inside a task: not served
                raise InternalError(
                    detail="the tool asked for input with an input round inside a task"
                    " (declare it gather_first, or send the input with the call)"
                )
            return out

        return await self.face.create(requestor, ext.TOOLS_CALL, work)
