"""The SDK's own request pipeline as a front door (stdio, and every HTTP request the task
endpoint leaves to the SDK): its middleware and request handlers build a
:class:`~.router.TaskRequest` and call the router; nothing here knows a task rule.

What it does to the server, all through ``Server.middleware`` (its middleware goes first),
``Server.add_request_handler`` and ``Server.add_notification_handler``:

- ``initialize``: adds ``capabilities.tasks`` (the router's, R-CAP-1, R-CAP-2) on sessions
  of the core face's revision, and notes the session for the task endpoint;
- ``tools/list``: stamps each tool's ``execution.taskSupport`` (the router's) on that face;
- ``tools/call``: the router answers it (a task) or hands it back (:class:`Pass`) to run
  as usual; a task's tool later runs through the SDK's whole pipeline again, by the one
  runner every door and worker uses (:mod:`.tool_runner`), which leaves this middleware out;
- ``tasks/*`` of both faces: one handler per method name; ``notifications/tasks/status``
  from the client: to the core face's handler;
- the tasks extension in ``server/discover`` (``Server.extensions``, X-CAP-2) when its
  handler serves anything.

Errors (its one mapping, :func:`sdk_error`, which ``subscriptions/listen`` uses too): a
:class:`TaskError` becomes the SDK's ``MCPError`` with its code, message and data; a
``ValidationError`` ``-32602`` naming the field; any other exception a plain ``-32603
Internal error`` (traceback in the log).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from ... import protocol
from ...errors import InternalError, TaskError
from ..faces import EXTENSION
from ..sdk import (
    INITIALIZE,
    TOOLS_LIST,
    CallNext,
    HandlerResult,
    MCPError,
    connection_of,
    door_middleware,
    from_sdk_error,
    request_outbound,
    to_sdk_error,
    validation_error,
)
from .identity import note_address, request_origin, requestor_of
from .listen import TaskListen
from .router import Pass, RunTool, TaskRequest, internal_error, task_request
from .serving import Serving, passed_params
from .tool_runner import envelope_connection, tool_runner

__all__ = ["SdkHooks", "sdk_error"]


def sdk_error(exc: Exception, what: str) -> MCPError:
    """What this door raises to the SDK for ``exc`` (the one mapping): the SDK's own error
    as is, a :class:`TaskError` with its code, message and data, a ``ValidationError``
    ``-32602`` naming the field, anything else (:class:`NeedsStream` included: this door
    always offers a stream) a plain ``-32603`` with the traceback in the log."""
    if isinstance(exc, MCPError):
        return exc
    if isinstance(exc, ValidationError):
        return to_sdk_error(validation_error(exc))
    if isinstance(exc, TaskError):
        return to_sdk_error(exc)
    return to_sdk_error(internal_error(exc, what))


class _RawParams(BaseModel):
    """Accept any params: the face's handler validates them and names the bad field."""

    model_config = ConfigDict(extra="allow")


class SdkHooks:
    """The SDK's pipeline as a front door for one server's :class:`~.serving.Serving`."""

    def __init__(self, serving: Serving) -> None:
        self.serving = serving
        self.router = serving.router
        self.server = serving.server

    def install(self) -> None:
        server, router = self.server, self.router
        # first, as the task endpoint is in front of the whole pipeline: a tools/call that
        # becomes a task reaches the router as sent (a sealed requestState among it), and
        # its tool then runs through the whole pipeline once (.tool_runner) on either door
        server.middleware.insert(0, self.middleware)
        for method in sorted(router.methods):
            server.add_request_handler(method, _RawParams, self._handler(method))
        for method in router.core.notifications:
            server.add_notification_handler(method, _RawParams, self._notification(method))
        if EXTENSION is not None and router.extension_offered():
            server.extensions[EXTENSION.EXTENSION_ID] = {}  # server/discover (X-CAP-2)
            channel = EXTENSION.NOTIFICATION_CHANNEL  # task notifications (X-NOTIF-2)
            original = server.get_request_handler(channel)
            listen = TaskListen(self.serving, original, self.request, sdk_error, EXTENSION)
            server.add_request_handler(channel, _RawParams, listen)

    # ------------------------------------------------------------------ requests
    def request(self, ctx: Any, *, runs_tool: bool = False, stream: bool = False) -> TaskRequest:
        """The router's view of the SDK request ``ctx``; ``runs_tool``: a ``tools/call`` whose
        tool may run as a task, ``stream`` offers the request's own stream for input requests
        (R-INPUT-3)."""
        version = ctx.protocol_version
        extension = self.router.is_extension(version)
        session_id, address, stdio = request_origin(ctx, sessionless=extension)
        return task_request(
            version=version,
            method=ctx.method,
            params=dict(ctx.params or {}),
            id=ctx.request_id,
            session_id=session_id,
            address=address,
            stdio=stdio,
            connection=None if extension else connection_of(ctx.session),
            headers=getattr(ctx.request, "headers", None),
            send_request=_sender(ctx) if stream else None,
            run_tool=self._runner(ctx, extension) if runs_tool else None,
        )

    def _runner(self, ctx: Any, extension: bool) -> RunTool:
        """A task's tool through the SDK's pipeline (the one runner both doors use), on the
        request's connection (the extension face: one from the request's own envelope)."""
        if extension:
            conn = envelope_connection(ctx.protocol_version, ctx.params or {})
        else:
            conn = connection_of(ctx.session)
        return tool_runner(self.server, conn, ctx.lifespan_context)

    @door_middleware  # a task's own run leaves it out (the call already is a task)
    async def middleware(self, ctx: Any, call_next: CallNext) -> HandlerResult:
        if ctx.request_id is None:  # notifications
            return await call_next(ctx)
        try:
            if ctx.method == protocol.TOOLS_CALL:
                passed = passed_params(getattr(ctx, "request", None))
                if passed is not None:  # the task endpoint routed it: not a task
                    return await call_next(dataclasses.replace(ctx, params=passed))
                routed = await self.router.route(self.request(ctx, runs_tool=True))
                if isinstance(routed, Pass):
                    return await call_next(dataclasses.replace(ctx, params=routed.params))
                return routed
            result = await call_next(ctx)
            if ctx.method == INITIALIZE:
                self._patch_initialize(ctx, result)
            elif ctx.method == TOOLS_LIST:
                self._patch_tools_list(ctx, result)
            return result
        except Exception as exc:
            raise sdk_error(exc, ctx.method) from None

    def _handler(self, method: str) -> Callable[[Any, _RawParams], Awaitable[dict[str, Any]]]:
        async def handler(ctx: Any, _: _RawParams) -> dict[str, Any]:
            try:
                routed = await self.router.route(self.request(ctx, stream=True))
            except Exception as exc:  # this door always offers its stream: no NeedsStream
                raise sdk_error(exc, method) from None
            if isinstance(routed, Pass):  # pragma: no cover - only tools/call passes
                raise to_sdk_error(InternalError(detail=method))
            return routed

        return handler

    def _notification(self, method: str) -> Callable[[Any, _RawParams], Awaitable[None]]:
        async def notified(ctx: Any, _: _RawParams) -> None:
            await self.router.notify(self.request(ctx))

        return notified

    # ------------------------------------------------------------------ advertising
    def _patch_initialize(self, ctx: Any, result: HandlerResult) -> None:
        conn = connection_of(ctx.session)
        note_address(conn, getattr(ctx.request, "scope", None))  # its budget (R-SEC-4)
        self.serving.sessions.note(conn)
        if not isinstance(result, dict) or result.get("protocolVersion") != protocol.REVISION:
            return
        _, identified = requestor_of(ctx)
        caps = result.setdefault("capabilities", {})
        caps["tasks"] = self.router.core_capability(identified)

    def _patch_tools_list(self, ctx: Any, result: HandlerResult) -> None:
        if not isinstance(result, dict):
            return
        tools = [t for t in result.get("tools", []) if isinstance(t, dict)]
        if not result.get("nextCursor"):
            self.serving.tools_listed(str(t.get("name")) for t in tools)
        if ctx.protocol_version != protocol.REVISION:
            return
        for tool in tools:
            support = self.router.task_support(str(tool.get("name", "")))
            if support is not None:
                tool["execution"] = {**(tool.get("execution") or {}), "taskSupport": support}


def _sender(ctx: Any) -> Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]:
    """R-INPUT-3: a task's input request on this request's own stream (the ``tasks/result``
    response stream), else the connection's standalone channel."""
    session = ctx.session
    conn = connection_of(session)

    async def send(method: str, params: dict[str, Any]) -> dict[str, Any]:
        try:
            if session.can_send_request:
                answer: dict[str, Any] = await request_outbound(session).send_raw_request(
                    method, params
                )
                return answer
            result: dict[str, Any] = await conn.send_raw_request(method, params)
            return result
        except MCPError as exc:
            raise from_sdk_error(exc) from None

    return send
