"""The task endpoint: the task methods answered in front of the SDK's Streamable HTTP
endpoint, without its per-request machinery (memory streams, task groups, dispatcher,
middleware chain). A front door that knows HTTP, not task rules.

:meth:`McpTasks.streamable_http_app <.mcp_server.McpTasks.streamable_http_app>` puts
:class:`TaskEndpoint` where the SDK's endpoint was (inside the SDK's bearer-auth middleware,
so auth runs first and through the SDK's own verifier). For a POST it does only ASGI work:
buffer the body (and replay it when it hands the request on), the envelope checks the SDK
would make (Content-Type, JSON, a JSON-RPC request, Host/Origin, Accept, the routing headers
and ``Mcp-Param`` headers of the extension's revision), the HTTP session and its idle timer,
and the watch for a client that leaves while it waits. It then builds the request and calls
the one :class:`~.router.Router`, and answers with ``application/json`` (which Streamable
HTTP allows for any request):

- the core face (2025-11-25), on a live session past its handshake or stateless HTTP:
  ``tasks/*`` and ``tools/call``; a ``tasks/result`` waits up to :data:`RESULT_WAIT_S` for a
  task that ends without asking for input;
- the extension face (2026-07-28): ``tasks/*`` and ``tools/call``.

Everything else goes to the SDK unchanged, body replayed, decided before anything ran:
every request the SDK would refuse (so refusals keep the SDK's shape), and a ``tools/call``
that does not become a task (:class:`~.router.Pass`, decided before any task or run). One
request is handed on after the router had it: a core ``tasks/result`` whose task asks for
input (its requests ride the request's own stream, R-INPUT-3, which only the SDK's
transport has: :class:`NeedsStream`) or runs past :data:`RESULT_WAIT_S`; the router only
read for it (waiting changes nothing) and counted it once (R-SEC-3, ``COUNTED_SCOPE``). Any
error raised once the router has the request is answered here (a JSON-RPC internal error),
never handed on: the SDK's path would run it again (a second task, a second run of its tool).
A task's tool runs through the one runner both doors use (:mod:`.tool_runner`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import anyio
import pydantic_core
from pydantic import ValidationError

from .. import protocol
from .._handlers import NeedsStream
from ..errors import InternalError, InvalidRequest, TaskError
from ._sdk import (
    DEFAULT_NEGOTIATED_VERSION,
    ERROR_CODE_HTTP_STATUS,
    HANDSHAKE_PROTOCOL_VERSIONS,
    MCP_PROTOCOL_VERSION_HEADER,
    MCP_SESSION_ID_HEADER,
    Connection,
    InFlight,
    JSONRPCRequest,
    http_session,
    initialized,
    lifespan_state,
    loads_json,
    mcp_param_rejection,
    modern_route,
    post_checks_pass,
    transport_security,
)
from .mcp_identity import client_address, http_requestor, identifies
from .router import COUNTED_SCOPE, Pass, TaskRequest
from .tool_runner import envelope_connection, tool_runner

if TYPE_CHECKING:
    from .mcp_server import McpTasks

__all__ = ["Outermost", "TaskEndpoint", "install"]

log = logging.getLogger(__name__)

_JSON = b"application/json"
_JSON_TYPE = _JSON.decode()
_SESSION_HEADER = MCP_SESSION_ID_HEADER.lower()
_VERSION_HEADER = MCP_PROTOCOL_VERSION_HEADER.lower()
#: how long a ``tasks/result`` waits here for its task to end before the SDK's path (which
#: streams input requests and keeps the wait alive) takes it over
RESULT_WAIT_S: Final = 10.0
#: set in the ASGI scope of a request the task endpoint has already left to the SDK
_SEEN = "mcp_tasks.task_endpoint_seen"
#: scope key: the request reached the router here (an error after that is answered here)
_ROUTED = "mcp_tasks.task_endpoint_routed"


class ClientGone(Exception):
    """The client left while its request waited here."""


@dataclass(slots=True)
class Reply:
    """A JSON-RPC answer of the task endpoint, sent as one ``application/json`` response."""

    request_id: str | int | None
    result: Mapping[str, Any] | None = None
    error: Mapping[str, Any] | None = None
    status: int = 200
    session_id: str | None = None

    async def send(self, send: Any) -> None:
        doc: dict[str, Any] = {"jsonrpc": "2.0", "id": self.request_id}
        if self.error is not None:
            doc["error"] = self.error
        else:
            doc["result"] = self.result
        body = _json(doc)
        headers = [(b"content-type", _JSON), (b"content-length", str(len(body)).encode())]
        if self.session_id is not None:
            headers.append((_SESSION_HEADER.encode(), self.session_id.encode()))
        await send({"type": "http.response.start", "status": self.status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _json(doc: Any) -> bytes:
    """``doc`` as JSON; a string that is not valid Unicode (a lone surrogate a client sent
    as a ``\\uXXXX`` escape, now in a result) as its escape again, as the SDK writes it."""
    try:
        return pydantic_core.to_json(doc)
    except ValueError:  # PydanticSerializationError among them
        return json.dumps(doc, separators=(",", ":")).encode()


def _headers(scope: Mapping[str, Any]) -> dict[str, str]:
    """The request's headers, lower-case names (as ASGI sends them), the first of repeated
    ones (as Starlette): read last to first, so the first one is written last."""
    raw = scope.get("headers", ())
    if not isinstance(raw, (list, tuple)):  # ASGI allows any iterable
        raw = list(raw)
    return {k.decode("latin-1"): v.decode("latin-1") for k, v in reversed(raw)}


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


#: the body of a request not read here: not JSON (its type or its text), or not read whole
_UNREAD: Final = object()


def _document(headers: Mapping[str, str], body: bytes | None) -> Any:
    """The request's body parsed (a lone surrogate escape too, as on the SDK's paths), or
    :data:`_UNREAD` (the SDK answers it)."""
    if body is None or headers.get("content-type", "").split(";")[0].strip() != _JSON_TYPE:
        return _UNREAD
    try:
        return loads_json(body)
    except ValueError:
        return _UNREAD


def _id_in_use(rid: str | int, session_id: str) -> Reply:
    """``-32600`` for a request whose id is already in flight on its session."""
    detail = f"id {json.dumps(rid)} is already in use by a request in flight"
    return Reply(
        rid, error=InvalidRequest(detail=detail).to_error(), status=400, session_id=session_id
    )


_BAD_ID: Final = InvalidRequest(detail="a request's id must be a string or an integer").to_error()


def _bad_id(doc: Any) -> bool:
    """A request (it has a ``method``) whose ``id`` is there but neither a string nor an
    integer (``1.5``, ``true``, ``null``, ``{}``): JSON-RPC answers it ``-32600``, id null."""
    if not isinstance(doc, dict) or "id" not in doc or not isinstance(doc.get("method"), str):
        return False
    rid = doc["id"]
    return isinstance(rid, bool) or not isinstance(rid, (str, int))


def _envelope(doc: Any) -> tuple[JSONRPCRequest, dict[str, Any]] | None:
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


def _error_status(version: str | None, code: int) -> int:
    """The HTTP status of an error answer: 200 in the handshake era (2025-11-25), else the
    SDK's status for its code."""
    return 200 if version in (None, protocol.REVISION) else ERROR_CODE_HTTP_STATUS.get(code, 200)


def _internal_error(doc: Mapping[str, Any], headers: Mapping[str, str]) -> Reply:
    """The answer to a request that failed after it was routed: a JSON-RPC internal error."""
    error = InternalError(message="Internal error")
    status = _error_status(headers.get(_VERSION_HEADER), error.code)
    return Reply(
        doc.get("id"),
        error=error.to_error(),
        status=status,
        session_id=headers.get(_SESSION_HEADER),
    )


class TaskEndpoint:
    """The ASGI app in front of the SDK's Streamable HTTP endpoint (see the module)."""

    def __init__(self, tasks: McpTasks, sdk_app: Any, manager: Any) -> None:
        self.tasks = tasks
        self.router = tasks.router
        self.sdk_app = sdk_app
        self.manager = manager
        self.security = transport_security(manager)
        #: the methods routed here on each era (the router's: task methods, ``tools/call``)
        self.methods = self.router.routed
        #: how many requests the task endpoint replied to, and how many it left to the SDK
        self.replied = 0
        self.passed = 0
        #: ``(session, id)`` of every request in flight on a session (:meth:`_in_flight_key`)
        self.in_flight: set[tuple[str, str]] = set()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") != "http" or scope.get("method") != "POST" or _SEEN in scope:
            await self.sdk_app(scope, receive, send)
            return
        await self.serve(scope, receive, send, self.sdk_app)

    async def serve(self, scope: Any, receive: Any, send: Any, fallback: Any) -> None:
        """Reply a POST, or hand it to ``fallback`` with its body replayed. A request whose
        id is in flight on its session (here or on the SDK's path) is refused at once."""
        messages, body = await _read_body(receive, self.manager.max_request_body_size)
        headers = _headers(scope)
        doc = _document(headers, body)
        key = self._in_flight_key(scope, headers, doc)
        if key is not None:
            if key in self.in_flight:
                self.replied += 1
                await _id_in_use(doc["id"], key[0]).send(send)
                return
            self.in_flight.add(key)
        try:
            await self._serve(scope, receive, send, fallback, messages, headers, doc)
        finally:
            if key is not None:
                self.in_flight.discard(key)

    async def _serve(
        self,
        scope: Any,
        receive: Any,
        send: Any,
        fallback: Any,
        messages: list[Any],
        headers: Mapping[str, str],
        doc: Any,
    ) -> None:
        reply: Reply | None = None
        if doc is not _UNREAD:
            try:
                reply = await self.reply(scope, headers, doc, receive)
            except ClientGone:
                return  # left while its tasks/result waited: nobody to answer
            except Exception:
                if not scope.get(_ROUTED):  # nothing ran yet: the SDK's path answers it
                    log.exception("task endpoint: a request went to the SDK after an error")
                    reply = None
                else:  # it ran here: answered here, never run a second time by the SDK
                    log.exception("task endpoint: %s failed after it was routed", doc["method"])
                    reply = _internal_error(doc, headers)
        if reply is None:
            self.passed += 1
            scope[_SEEN] = True
            await fallback(scope, _replay(messages, receive), send)
            return
        self.replied += 1
        await reply.send(send)

    def _in_flight_key(
        self, scope: Any, headers: Mapping[str, str], doc: Any
    ) -> tuple[str, str] | None:
        """``(session, id)`` of a request on a live session of its sender, else ``None``.
        The id is held until the request is answered, here or by the SDK's path, whose
        transport keys a request's answer by its id as text (``7`` and ``"7"`` alike): a
        second request with it meanwhile would take the first one's answer and leave
        the rest unanswered (JSON-RPC 2.0; MCP: an id is not reused within a session)."""
        session_id = headers.get(_SESSION_HEADER)
        if session_id is None or not isinstance(doc, dict) or "method" not in doc:
            return None
        rid = doc.get("id")
        if isinstance(rid, bool) or not isinstance(rid, (str, int)):
            return None
        if http_session(self.manager, session_id, scope.get("user")) is None:
            return None  # the SDK refuses it (unknown session, another credential's)
        return session_id, str(rid)

    async def reply(
        self, scope: Any, headers: Mapping[str, str], doc: Any, receive: Any = None
    ) -> Reply | None:
        """The reply to a request served here (``doc``: its body, parsed), else ``None``
        (the SDK answers)."""
        if _bad_id(doc):  # the SDK would take it for a notification and answer nothing
            return Reply(None, error=_BAD_ID, status=400)
        parsed = _envelope(doc)
        if parsed is None or parsed[0].method not in self.methods:
            return None
        message, params = parsed
        if not await post_checks_pass(self.security, headers, self.manager.json_response):
            return None
        version = headers.get(_VERSION_HEADER)
        if version is None or version in HANDSHAKE_PROTOCOL_VERSIONS:
            return await self._handshake(scope, headers, version, message, params, receive)
        if not self.router.is_extension(version):
            return None
        return await self._modern(scope, headers, doc, message, params)

    # ------------------------------------------------------------------ the handshake era
    async def _handshake(
        self,
        scope: Any,
        headers: Mapping[str, str],
        version: str | None,
        message: JSONRPCRequest,
        params: dict[str, Any],
        receive: Any,
    ) -> Reply | None:
        session_id = headers.get(_SESSION_HEADER)
        if self.manager.stateless:
            if (version or DEFAULT_NEGOTIATED_VERSION) != protocol.REVISION:
                return None
            conn = None
            if message.method == protocol.TOOLS_CALL:  # a born-ready connection, as the SDK's
                conn = envelope_connection(protocol.REVISION, {})
            req = self._request(scope, protocol.REVISION, message, params, None, conn)
            return await self._route(req, None, receive, scope)
        if session_id is None:
            return None
        transport = http_session(self.manager, session_id, scope.get("user"))
        conn = self.tasks.sessions.connection(session_id)
        if transport is None or conn is None or not initialized(conn):
            return None
        if conn.protocol_version != protocol.REVISION:
            return None
        with InFlight(transport):
            req = self._request(scope, protocol.REVISION, message, params, session_id, conn)
            return await self._route(req, session_id, receive, scope)

    def _request(
        self,
        scope: Any,
        version: str,
        message: JSONRPCRequest,
        params: dict[str, Any],
        session_id: str | None,
        conn: Connection | None,
        headers: Mapping[str, str] | None = None,
    ) -> TaskRequest:
        requestor = http_requestor(session_id, client_address(scope))
        return TaskRequest(
            version=version,
            method=message.method,
            params=params,
            id=message.id,
            requestor=requestor,
            identified=identifies(requestor),
            connection=conn,
            headers=headers,
            # only a tools/call runs a tool: no SDK pipeline is built for a tasks/* request
            run_tool=(
                tool_runner(self.tasks.server, conn, lifespan_state(self.manager))
                if conn is not None and message.method == protocol.TOOLS_CALL
                else None
            ),
        )

    # ------------------------------------------------------------------ the extension
    async def _modern(
        self,
        scope: Any,
        headers: Mapping[str, str],
        doc: dict[str, Any],
        message: JSONRPCRequest,
        params: dict[str, Any],
    ) -> Reply | None:
        route = modern_route(doc, scope, headers)
        if route is None:
            return None  # the SDK's envelope checks refuse it
        conn = None
        if message.method == protocol.TOOLS_CALL:
            from starlette.requests import Request

            lifespan = lifespan_state(self.manager)
            if await mcp_param_rejection(
                self.tasks.server, Request(scope), message, route, lifespan
            ):
                return None
            conn = envelope_connection(route.protocol_version, params)
        req = self._request(scope, route.protocol_version, message, params, None, conn, headers)
        return await self._route(req, None, None, scope)

    # ------------------------------------------------------------------ answering
    async def _route(
        self, req: TaskRequest, session_id: str | None, receive: Any, scope: Any
    ) -> Reply | None:
        """The router's answer as JSON; ``None`` when the SDK's path must answer."""
        rid = req.id if req.id is not None else 0
        scope[_ROUTED] = True  # from here on the request is this door's to answer
        try:
            if req.method == protocol.TASKS_RESULT and receive is not None:
                routed = await self._waiting(req, receive, scope)
            else:
                routed = await self.router.route(req)
        except NeedsStream:
            return None
        except TaskError as exc:
            status = _error_status(req.version, exc.code)
            return Reply(rid, error=exc.to_error(), status=status, session_id=session_id)
        if routed is None or isinstance(routed, Pass):
            return None
        return Reply(rid, routed, session_id=session_id)

    async def _waiting(
        self, req: TaskRequest, receive: Any, scope: Any
    ) -> dict[str, Any] | Pass | None:
        """A ``tasks/result`` routed with a bound wait (``None`` after :data:`RESULT_WAIT_S`:
        the SDK's path takes it over) and :class:`ClientGone` when the client leaves; no
        watch and no deadline for a task that ended here a moment ago (nothing to wait for).
        The engine counts it against the rate limit as it arrives (R-SEC-3); the scope says
        so, so that the SDK's path does not count it again when it takes the request over."""
        if self.router.answers_at_once(req):  # its outcome is here: nothing to wait for
            return await self.router.route(req)
        scope[COUNTED_SCOPE] = True
        gone = False
        routed: dict[str, Any] | Pass | None = None

        async def watch(scope: anyio.CancelScope) -> None:
            nonlocal gone
            while (await receive()).get("type") != "http.disconnect":
                pass
            gone = True
            scope.cancel()

        failure: Exception | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch, tg.cancel_scope)
            with anyio.move_on_after(RESULT_WAIT_S):
                try:
                    routed = await self.router.route(req)
                except (TaskError, NeedsStream) as exc:  # raised past the task group as is
                    failure = exc
            tg.cancel_scope.cancel()
        if gone:
            raise ClientGone()
        if failure is not None:
            raise failure
        return routed


class Outermost:
    """In front of the whole app when nothing must run before the endpoint (no auth, no
    middleware of the app's own): a ``POST`` to the endpoint's own path skips the app's
    middleware and routing on its way to the task endpoint; the rest goes to the app as it is.
    Anything else asked of it (``routes``, ``add_middleware``, ``state``...) is the app's:
    middleware added to the app later is seen at once, and the task endpoint then answers from
    inside it, at the endpoint."""

    def __init__(self, endpoint: TaskEndpoint, app: Any, path: str) -> None:
        self.endpoint = endpoint
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
            await self.endpoint.serve(scope, receive, send, self.app)
        else:
            await self.app(scope, receive, send)


def install(tasks: McpTasks, app: Any, path: str) -> tuple[TaskEndpoint, Any]:
    """Put a :class:`TaskEndpoint` in front of the SDK's endpoint at ``path`` of ``app``; the
    app to serve (``app`` itself, or an :class:`Outermost` around it without auth)."""
    from ._sdk import http_endpoint, session_manager

    holder, attr, guarded = http_endpoint(app, path)
    endpoint = TaskEndpoint(tasks, getattr(holder, attr), session_manager(tasks.server))
    setattr(holder, attr, endpoint)
    return endpoint, (app if guarded else Outermost(endpoint, app, path))
