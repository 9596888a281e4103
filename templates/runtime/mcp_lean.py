"""The lean path: the task methods answered in front of the SDK's Streamable HTTP endpoint.

:meth:`McpTasks.streamable_http_app <.mcp_server.McpTasks.streamable_http_app>` puts
:class:`LeanPath` where the SDK's endpoint was (inside the SDK's bearer-auth middleware, so
auth runs first and through the SDK's own verifier). It answers, with ``application/json``
(which Streamable HTTP allows for any request), the requests it can serve exactly as the
SDK would and without its per-request machinery (memory streams, task groups, dispatcher,
middleware chain):

- 2025-11-25, on a live session past its handshake (or stateless HTTP): ``tasks/get``,
  ``tasks/list``, ``tasks/cancel``, ``tasks/result`` of a task already terminal, and a
  task-augmented ``tools/call`` of a tool that may run as a task;
- the tasks extension (2026-07-28): ``tasks/get``, ``tasks/update``, ``tasks/cancel`` and a
  ``tools/call`` that becomes a task, once the SDK's own envelope checks pass.

Everything else, and every request the SDK would refuse (bad Host/Origin, unknown, deleted
or idled-out session, another credential's session, bad Accept or Content-Type, bad JSON
or envelope, a body over the limit, a header/body mismatch), goes to the SDK unchanged, body
replayed, so refusals keep the SDK's shape. The answers come from the same engine calls as
on the SDK's path: the same identity, limits, rate limit, audit and error payloads; a
task's tool runs through the SDK's own request pipeline in the background.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio
import pydantic_core
from mcp.server.connection import Connection
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, check_accept_headers
from mcp.server.transport_security import TransportSecurityMiddleware
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    MCP_PROTOCOL_VERSION_HEADER,
    InboundLadderRejection,
    classify_inbound_request,
    find_duplicated_routing_header,
)
from mcp_types import DEFAULT_NEGOTIATED_VERSION, JSONRPCRequest
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.requests import Request

from ..errors import InternalError, TaskError
from ..handlers import RequestContext
from ..protocol import (
    INPUT_REQUIRED,
    REVISION,
    TASK_SUPPORT_OPTIONAL,
    TASK_SUPPORT_REQUIRED,
    TASKS_CANCEL,
    TASKS_GET,
    TASKS_LIST,
    TASKS_RESULT,
    TERMINAL,
    TOOLS_CALL,
)
from ..store import TaskRecord
from ._sdk import (
    InFlight,
    http_session,
    initialized,
    lifespan_state,
    mcp_param_rejection,
    sdk_request_runner,
    tool_call_params,
)

if TYPE_CHECKING:
    from .mcp_server import McpTasks, RunTool

__all__ = ["LeanPath", "Outermost", "install"]

log = logging.getLogger(__name__)

_JSON = b"application/json"
_SESSION_HEADER = MCP_SESSION_ID_HEADER.lower()
_VERSION_HEADER = MCP_PROTOCOL_VERSION_HEADER.lower()
_SERVES = frozenset({TASK_SUPPORT_OPTIONAL, TASK_SUPPORT_REQUIRED})
_ENGINE_METHODS = frozenset({TASKS_GET, TASKS_LIST, TASKS_CANCEL})
#: how long a ``tasks/result`` waits on the lean path for its task to end before the SDK's
#: path (which streams input requests and keeps the wait alive) takes it over
RESULT_WAIT_S = 10.0
#: set in the ASGI scope of a request the lean path has already left to the SDK
_SEEN = "mcp_tasks.lean_seen"


class ClientGone(Exception):
    """The client left while its request waited on the lean path."""


class Answer:
    """A JSON-RPC answer of the lean path, sent as one ``application/json`` response."""

    __slots__ = ("request_id", "result", "error", "status", "session_id")

    def __init__(
        self,
        request_id: str | int,
        result: Mapping[str, Any] | None = None,
        error: Mapping[str, Any] | None = None,
        status: int = 200,
        session_id: str | None = None,
    ) -> None:
        self.request_id = request_id
        self.result = result
        self.error = error
        self.status = status
        self.session_id = session_id

    async def send(self, send: Any) -> None:
        doc: dict[str, Any] = {"jsonrpc": "2.0", "id": self.request_id}
        if self.error is not None:
            doc["error"] = self.error
        else:
            doc["result"] = self.result
        body = pydantic_core.to_json(doc)
        headers = [(b"content-type", _JSON), (b"content-length", str(len(body)).encode())]
        if self.session_id is not None:
            headers.append((_SESSION_HEADER.encode(), self.session_id.encode()))
        await send({"type": "http.response.start", "status": self.status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _headers(scope: Mapping[str, Any]) -> dict[str, str]:
    """The request's headers, lower-case names, the first of repeated ones (as Starlette)."""
    out: dict[str, str] = {}
    for key, value in scope.get("headers", ()):
        out.setdefault(key.decode("latin-1"), value.decode("latin-1"))
    return out


async def _read_body(receive: Any, limit: int) -> tuple[list[Any], bytes | None]:
    """The messages read and the whole body; ``None`` for the body when it is over
    ``limit`` or the client left (the SDK answers those, from the replayed messages)."""
    messages: list[Any] = []
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return messages, None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return messages, None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return messages, b"".join(chunks)


def _replay(messages: list[Any], receive: Any) -> Any:
    """``receive`` that hands out ``messages`` first, then the client's own."""
    pending = list(messages)

    async def replayed() -> Any:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed


def _request(doc: Any) -> tuple[JSONRPCRequest, dict[str, Any]] | None:
    """A well-formed JSON-RPC request and its params (by name), else ``None``."""
    if not isinstance(doc, dict):
        return None
    params = doc.get("params")
    if params is not None and not isinstance(params, dict):
        return None
    try:
        return JSONRPCRequest.model_validate(doc), dict(params or {})
    except ValidationError:
        return None


def _progress_token(params: Mapping[str, Any]) -> str | int | None:
    meta = params.get("_meta")
    token = meta.get("progressToken") if isinstance(meta, Mapping) else None
    return token if isinstance(token, (str, int)) and not isinstance(token, bool) else None


def _meta(params: Mapping[str, Any]) -> Mapping[str, Any] | None:
    meta = params.get("_meta")
    return meta if isinstance(meta, Mapping) else None


class LeanPath:
    """The ASGI app in front of the SDK's Streamable HTTP endpoint (see the module)."""

    def __init__(self, tasks: McpTasks, sdk_app: Any, manager: Any) -> None:
        self.tasks = tasks
        self.sdk_app = sdk_app
        self.manager = manager
        self.security = TransportSecurityMiddleware(manager.security_settings)
        #: how many requests the lean path answered, and how many it left to the SDK
        self.answered = 0
        self.passed = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") != "http" or scope.get("method") != "POST" or _SEEN in scope:
            await self.sdk_app(scope, receive, send)
            return
        await self.serve(scope, receive, send, self.sdk_app)

    async def serve(self, scope: Any, receive: Any, send: Any, fallback: Any) -> None:
        """Answer a POST, or hand it to ``fallback`` with its body replayed."""
        messages, body = await _read_body(receive, self.manager.max_request_body_size)
        answer: Answer | None = None
        if body is not None:
            try:
                answer = await self.answer(scope, body, receive)
            except ClientGone:
                return  # left while its tasks/result waited: nobody to answer
            except Exception:  # never lose a request: the SDK's path answers it
                log.exception("lean path: a request fell back to the SDK after an error")
                answer = None
        if answer is None:
            self.passed += 1
            scope[_SEEN] = True
            await fallback(scope, _replay(messages, receive), send)
            return
        self.answered += 1
        await answer.send(send)

    async def answer(self, scope: Any, body: bytes, receive: Any = None) -> Answer | None:
        """The answer of a request this path serves, else ``None`` (the SDK answers)."""
        headers = _headers(scope)
        if not headers.get("content-type", "").split(";")[0].strip() == _JSON.decode():
            return None
        try:
            doc = pydantic_core.from_json(body)
        except ValueError:
            return None
        parsed = _request(doc)
        if parsed is None:
            return None
        message, params = parsed
        request = Request(scope)
        if await self.security.validate_request(request, is_post=True) is not None:
            return None
        has_json, has_sse = check_accept_headers(request)  # as the SDK asks, on both eras
        if not has_json or not (self.manager.json_response or has_sse):
            return None
        method, rid = message.method, message.id
        version = headers.get(_VERSION_HEADER)
        if version is None or version in HANDSHAKE_PROTOCOL_VERSIONS:
            return await self._handshake(scope, headers, version, method, rid, params, receive)
        ext = self.tasks.extension
        if ext is None or version != ext.revision:
            return None
        return await self._modern(request, headers, doc, message, params)

    # ------------------------------------------------------------------ 2025-11-25
    async def _handshake(
        self,
        scope: Any,
        headers: Mapping[str, str],
        version: str | None,
        method: str,
        rid: str | int,
        params: dict[str, Any],
        receive: Any = None,
    ) -> Answer | None:
        if method not in _ENGINE_METHODS and method not in (TASKS_RESULT, TOOLS_CALL):
            return None
        session_id = headers.get(_SESSION_HEADER)
        if self.manager.stateless:
            if (version or DEFAULT_NEGOTIATED_VERSION) != REVISION:
                return None
            return await self._serve_2025(None, None, method, rid, params, receive)
        if session_id is None:
            return None
        transport = http_session(self.manager, session_id, scope.get("user"))
        conn = self.tasks.session_connection(session_id)
        if transport is None or conn is None or not initialized(conn):
            return None
        if conn.protocol_version != REVISION:
            return None
        with InFlight(transport):
            return await self._serve_2025(session_id, conn, method, rid, params, receive)

    async def _serve_2025(
        self,
        session_id: str | None,
        conn: Connection | None,
        method: str,
        rid: str | int,
        params: dict[str, Any],
        receive: Any = None,
    ) -> Answer | None:
        tasks = self.tasks
        requestor = tasks.http_requestor(session_id)
        rctx = RequestContext(
            requestor=requestor,
            request_id=rid,
            progress_token=_progress_token(params),
            meta=_meta(params),
        )
        try:
            if method == TOOLS_CALL:
                result = await self._tool_task_2025(rctx, conn, params)
            elif method == TASKS_RESULT:
                result = await self._result_2025(rctx, params, receive)
            else:
                if conn is not None:
                    tasks.remember(requestor, conn)
                result = await tasks.engine.handle(method, params, rctx)
        except TaskError as exc:
            return Answer(rid, error=exc.to_error(), session_id=session_id)
        except Exception:
            log.exception("%s failed", method)
            return Answer(rid, error=_internal(), session_id=session_id)
        if result is None:
            return None
        return Answer(rid, result, session_id=session_id)

    async def _tool_task_2025(
        self, rctx: RequestContext, conn: Connection | None, params: dict[str, Any]
    ) -> dict[str, Any] | None:
        task = params.get("task")
        if task is None:
            return None  # not task-augmented: the SDK runs the tool
        try:
            raw, parsed = tool_call_params(params)
        except TaskError:
            return None  # the SDK's path names the bad field
        if self.tasks.task_support.get(parsed.name) not in _SERVES:
            return None  # forbidden or unknown: the SDK's path refuses it (R-TOOL-2)
        if conn is None:  # stateless HTTP: a born-ready connection per request, as the SDK's
            conn = Connection.from_envelope(REVISION, None, None)
        call = {k: v for k, v in raw.items() if k != "task"}
        return await self.tasks.start_task(rctx, conn, self._runner(conn), call, task)

    async def _result_2025(
        self, rctx: RequestContext, params: dict[str, Any], receive: Any
    ) -> dict[str, Any] | None:
        """``tasks/result`` of a task that ends without asking for input: at once when it is
        terminal (or its work returned here), else once it ends within ``RESULT_WAIT_S``.
        A task that asks for input first (its requests ride the request's own stream,
        R-INPUT-3), or runs longer, is left to the SDK's path; so is every refusal."""
        task_id = params.get("taskId")
        if not isinstance(task_id, str):
            return None
        engine = self.tasks.engine
        if not engine.outcome_pending(task_id):  # else its work returned here: no input comes
            try:
                rec = await self._settled(rctx.requestor, task_id, receive)
            except TaskError:
                return None  # the SDK's path answers (and counts) the refusal
            if rec.status not in TERMINAL:
                return None
        ended: dict[str, Any] = await engine.handle(TASKS_RESULT, params, rctx)
        return ended

    async def _settled(self, requestor: str, task_id: str, receive: Any) -> TaskRecord:
        """The task once terminal or asking for input, or as it is after ``RESULT_WAIT_S``;
        :class:`ClientGone` when the client leaves meanwhile."""
        engine = self.tasks.engine
        rec = await engine.lookup(requestor, task_id)
        if rec.status in TERMINAL or rec.status == INPUT_REQUIRED or receive is None:
            return rec
        gone = False

        async def watch(scope: anyio.CancelScope) -> None:
            nonlocal gone
            while (await receive()).get("type") != "http.disconnect":
                pass
            gone = True
            scope.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(watch, tg.cancel_scope)
            with anyio.move_on_after(RESULT_WAIT_S):
                rec = await engine.settled(requestor, task_id)
            tg.cancel_scope.cancel()
        if gone:
            raise ClientGone()
        return rec

    def _runner(self, conn: Connection) -> RunTool:
        """A task's tool run through the SDK's own pipeline for ``conn``."""
        from .mcp_server import IN_TASK

        on_request = sdk_request_runner(self.tasks.server, conn, lifespan_state(self.manager))

        async def run(dctx: Any, params: dict[str, Any]) -> dict[str, Any]:
            token = IN_TASK.set(True)
            try:
                result: dict[str, Any] = await on_request(dctx, TOOLS_CALL, params)
                return result
            finally:
                IN_TASK.reset(token)

        return run

    # ------------------------------------------------------------------ the extension
    async def _modern(
        self,
        request: Request,
        headers: Mapping[str, str],
        doc: dict[str, Any],
        message: JSONRPCRequest,
        params: dict[str, Any],
    ) -> Answer | None:
        ext = self.tasks.extension
        method, rid = message.method, message.id
        if method != TOOLS_CALL and method not in ext.lean_methods:
            return None
        if find_duplicated_routing_header(request.headers.items()) is not None:
            return None
        route = classify_inbound_request(doc, headers=headers)
        if isinstance(route, InboundLadderRejection):
            return None
        rctx = ext.context_of(ext.requestor(), rid, _meta(params), headers)
        try:
            if method == TOOLS_CALL:
                result = await self._tool_task_ext(request, message, route, rctx, params)
            else:
                result = await ext.face.dispatch(method, params, rctx)
        except TaskError as exc:
            error = exc.to_error()
            return Answer(rid, error=error, status=ERROR_CODE_HTTP_STATUS.get(exc.code, 200))
        except Exception:
            log.exception("tasks extension: %s failed", method)
            return Answer(rid, error=_internal())
        if result is None:
            return None
        return Answer(rid, result)

    async def _tool_task_ext(
        self,
        request: Request,
        message: JSONRPCRequest,
        route: Any,
        rctx: RequestContext,
        params: dict[str, Any],
    ) -> dict[str, Any] | None:
        ext = self.tasks.extension
        try:
            raw, parsed = tool_call_params(params)
        except TaskError:
            return None
        if not ext.serves_task(parsed.name, rctx.meta, bool(parsed.input_responses)):
            return None  # runs inline, or refused (X-CAP-8), on the SDK's path
        lifespan = lifespan_state(self.manager)
        if await mcp_param_rejection(self.tasks.server, request, message, route, lifespan):
            return None
        conn = Connection.from_envelope(
            route.protocol_version, route.client_info, route.client_capabilities
        )
        call = {k: v for k, v in raw.items() if k != "task"}  # X-CREATE-5
        result: dict[str, Any] = await ext.start(rctx.requestor, self._runner(conn), call)
        return result


def _internal() -> dict[str, Any]:
    """The plain ``-32603`` every unexpected failure answers (details stay in the log)."""
    return InternalError(message="Internal error").to_error()


class Outermost:
    """In front of the whole app when nothing must run before the endpoint (no auth, no
    middleware of the app's own): a ``POST`` to the endpoint's own path skips the app's
    middleware and routing on its way to the lean path; the rest goes to the app as it is.
    Anything else asked of it (``routes``, ``add_middleware``, ``state``...) is the app's:
    middleware added to the app later is seen at once, and the lean path then answers from
    inside it, at the endpoint."""

    def __init__(self, lean: LeanPath, app: Any, path: str) -> None:
        self.lean = lean
        self.app = app
        self.path = path

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app, name)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if (
            scope.get("type") == "http"
            and scope.get("method") == "POST"
            and scope.get("path") == self.path
            and not scope.get("root_path")
            and not getattr(self.app, "user_middleware", None)
        ):
            await self.lean.serve(scope, receive, send, self.app)
        else:
            await self.app(scope, receive, send)


def install(tasks: McpTasks, app: Any, path: str) -> tuple[LeanPath, Any]:
    """Put a :class:`LeanPath` in front of the SDK's endpoint at ``path`` of ``app``; the
    app to serve (``app`` itself, or an :class:`Outermost` around it without auth)."""
    from ._sdk import http_endpoint, session_manager

    holder, attr, guarded = http_endpoint(app, path)
    lean = LeanPath(tasks, getattr(holder, attr), session_manager(tasks.server))
    setattr(holder, attr, lean)
    return lean, (app if guarded else Outermost(lean, app, path))
