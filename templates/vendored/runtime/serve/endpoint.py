"""The task endpoint: the task methods answered in front of the SDK's Streamable HTTP
endpoint, without its per-request machinery (memory streams, task groups, dispatcher,
middleware chain). A front door that knows HTTP, not task rules.

:meth:`McpTasks.streamable_http_app <.server.McpTasks.streamable_http_app>` puts
:class:`TaskEndpoint` where the SDK's endpoint was (inside the SDK's bearer-auth middleware,
so auth runs first and through the SDK's own verifier). For a POST it does only ASGI work:
buffer the body (and replay it when it hands the request on), the envelope checks the SDK
would make (Content-Type, JSON, a JSON-RPC request, Host/Origin, Accept, the routing headers
and ``Mcp-Param`` headers of the extension's revision), the HTTP session and its idle timer,
and the watch for a client that leaves while it waits. It then builds the request and calls
the one :class:`~.router.Router`, and answers with ``application/json`` (which Streamable
HTTP allows for any request):

- the core face (2025-11-25), on a live session past its handshake or stateless HTTP:
  ``tasks/*`` and ``tools/call``;
- the extension face (2026-07-28): ``tasks/*`` and ``tools/call``.

A core ``tasks/result`` that waits for its task answers on a stream of its own when it
must (:mod:`.result_stream`): its task's input requests ride it (R-INPUT-3), and the
client's POSTed answers to them are taken here.

A ``subscriptions/listen`` whose body is too big to name the most task ids a listen may
(:func:`~.router.oversized_listen`) is refused here before its body is parsed.

Everything else goes to the SDK unchanged, body replayed, decided before anything ran:
every request the SDK would refuse (so refusals keep the SDK's shape), a ``tools/call``
that does not become a task (:class:`~.router.Pass`, decided before any task or run), and
a core ``tasks/result`` on a server whose responses cannot stream here (``json_response``,
or an event store to replay streams from: the SDK's transport keeps those). Nothing the
router had is ever handed on: any error raised once the router has the request is answered
here (a JSON-RPC internal error); the SDK's path would run it again (a second task, a
second run of its tool). A task's tool runs through the one runner both doors use
(:mod:`.tool_runner`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import anyio
from pydantic import ValidationError

from ... import protocol
from ...errors import InvalidRequest, TaskError
from ..sdk import (
    DEFAULT_NEGOTIATED_VERSION,
    ERROR_CODE_HTTP_STATUS,
    HANDSHAKE_PROTOCOL_VERSIONS,
    MCP_PROTOCOL_VERSION_HEADER,
    MCP_SESSION_ID_HEADER,
    Connection,
    InFlight,
    JSONRPCRequest,
    http_endpoint,
    http_session,
    initialized,
    lifespan_state,
    loads_json,
    mcp_param_rejection,
    modern_route,
    post_checks_pass,
    session_ended,
    session_manager,
    transport_security,
)
from .asgi_io import freeing_id, read_body, replay
from .identity import client_address
from .input_push import WATCH_S
from .result_stream import STREAM_AFTER_S, Answers, ResultStream, is_response, to_json
from .router import Pass, TaskRequest, internal_error, oversized_listen, task_request
from .serving import Serving, mark_passed
from .tool_runner import envelope_connection, tool_runner

__all__ = ["Outermost", "TaskEndpoint", "install"]

log = logging.getLogger(__name__)

_JSON = b"application/json"
#: the headers of the ``202`` that takes a client's answer to an input request
_ACCEPTED: Final = [(b"content-length", b"0")]
_JSON_TYPE = _JSON.decode()
_SESSION_HEADER = MCP_SESSION_ID_HEADER.lower()
_VERSION_HEADER = MCP_PROTOCOL_VERSION_HEADER.lower()
#: how long a ``tasks/result`` waits unwatched for an outcome whose write is in flight
OUTCOME_SOON_S: Final = 0.05
#: set in the ASGI scope of a request the task endpoint has already left to the SDK
_SEEN = "mcp_tasks.task_endpoint_seen"
#: scope key: the request reached the router here (an error after that is answered here)
_ROUTED = "mcp_tasks.task_endpoint_routed"
#: scope key: the :class:`ResultStream` of a waiting ``tasks/result``
_STREAM = "mcp_tasks.task_endpoint_stream"


class ClientGone(Exception):
    """The client left while its request waited here."""


class SessionEnded(Exception):
    """The session of a request that waited here ended (deleted, or its idle timeout)."""


@dataclass(slots=True)
class Reply:
    """A JSON-RPC answer of the task endpoint, sent as one ``application/json`` response."""

    request_id: str | int | None
    result: Mapping[str, Any] | None = None
    error: Mapping[str, Any] | None = None
    status: int = 200
    session_id: str | None = None

    async def send(self, send: Any, stream: ResultStream | None = None) -> None:
        """The answer, as the last event of ``stream`` once that has started."""
        doc: dict[str, Any] = {"jsonrpc": "2.0", "id": self.request_id}
        if self.error is not None:
            doc["error"] = self.error
        else:
            doc["result"] = self.result
        if stream is not None and stream.started:
            await stream.finish(doc)
            return
        body = to_json(doc)
        headers = [(b"content-type", _JSON), (b"content-length", str(len(body)).encode())]
        if self.session_id is not None:
            headers.append((_SESSION_HEADER.encode(), self.session_id.encode()))
        await send({"type": "http.response.start", "status": self.status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _headers(scope: Mapping[str, Any]) -> dict[str, str]:
    """The request's headers, lower-case names (as ASGI sends them), the first of repeated
    ones (as Starlette): read last to first, so the first one is written last."""
    raw = scope.get("headers", ())
    if not isinstance(raw, (list, tuple)):  # ASGI allows any iterable
        raw = list(raw)
    return {k.decode("latin-1"): v.decode("latin-1") for k, v in reversed(raw)}


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


def _internal_error(exc: Exception, doc: Mapping[str, Any], headers: Mapping[str, str]) -> Reply:
    """The answer to a request that failed after it was routed: the one internal-error
    answer (:func:`~.router.internal_error`), as a JSON-RPC error reply."""
    error = internal_error(exc, f"task endpoint: {doc['method']} (after it was routed)")
    status = _error_status(headers.get(_VERSION_HEADER), error.code)
    return Reply(
        doc.get("id"),
        error=error.to_error(),
        status=status,
        session_id=headers.get(_SESSION_HEADER),
    )


class TaskEndpoint:
    """The ASGI app in front of the SDK's Streamable HTTP endpoint (see the module)."""

    def __init__(self, serving: Serving, sdk_app: Any, manager: Any) -> None:
        self.serving = serving
        self.router = serving.router
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
        #: the input requests sent on the streams of waiting ``tasks/result`` requests
        self.answers = Answers()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") != "http" or scope.get("method") != "POST" or _SEEN in scope:
            await self.sdk_app(scope, receive, send)
            return
        await self.serve(scope, receive, send, self.sdk_app)

    async def serve(self, scope: Any, receive: Any, send: Any, fallback: Any) -> None:
        """Reply a POST, or hand it to ``fallback`` with its body replayed. A request whose
        id is in flight on its session (here or on the SDK's path) is refused at once."""
        messages, body = await read_body(receive, self.manager.max_request_body_size)
        headers = _headers(scope)
        if body is not None and (refused := oversized_listen(headers, len(body))) is not None:
            self.replied += 1  # refused unparsed: parsing it would hold the event loop
            status = _error_status(headers.get(_VERSION_HEADER), refused.code)
            await Reply(None, error=refused.to_error(), status=status).send(send)
            return
        doc = _document(headers, body)
        if self.answers and is_response(doc) and await self._settled(scope, headers, doc):
            self.replied += 1
            await send({"type": "http.response.start", "status": 202, "headers": _ACCEPTED})
            await send({"type": "http.response.body", "body": b""})
            return
        key = self._in_flight_key(scope, headers, doc)
        if key is not None:
            if key in self.in_flight:
                self.replied += 1
                await _id_in_use(doc["id"], key[0]).send(send)
                return
            self.in_flight.add(key)
            send = freeing_id(send, self.in_flight, key)
        try:
            await self._serve(scope, receive, send, fallback, messages, headers, doc)
        finally:
            if key is not None:
                self.in_flight.discard(key)

    async def _settled(self, scope: Any, headers: Mapping[str, str], doc: Any) -> bool:
        """Whether ``doc``, a response POSTed by a client, answered an input request sent
        on a stream here (from its session's owner, through the checks the SDK makes)."""
        session_id = headers.get(_SESSION_HEADER)
        if (
            session_id is not None
            and http_session(self.manager, session_id, scope.get("user")) is None
        ):
            return False  # the SDK refuses it (unknown session, another credential's)
        if not await post_checks_pass(self.security, headers, self.manager.json_response):
            return False
        return self.answers.settle(session_id, doc)

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
                reply = await self.reply(scope, headers, doc, receive, send)
            except ClientGone:
                return  # left while its tasks/result waited: nobody to answer
            except SessionEnded:
                await scope[_STREAM].close()
                return
            except Exception as exc:
                if not scope.get(_ROUTED):  # nothing ran yet: the SDK's path answers it
                    log.exception("task endpoint: a request went to the SDK after an error")
                    reply = None
                else:  # it ran here: answered here, never run a second time by the SDK
                    reply = _internal_error(exc, doc, headers)
        if reply is None:
            self.passed += 1
            scope[_SEEN] = True
            await fallback(scope, replay(messages, receive), send)
            return
        self.replied += 1
        await reply.send(send, scope.get(_STREAM))

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
        self,
        scope: Any,
        headers: Mapping[str, str],
        doc: Any,
        receive: Any = None,
        send: Any = None,
    ) -> Reply | None:
        """The reply to a request served here (``doc``: its body, parsed), else ``None``
        (the SDK answers). ``receive`` and ``send``: the request's own, for a
        ``tasks/result`` that waits (without them it answers only what has ended)."""
        if _bad_id(doc):  # the SDK would take it for a notification and answer nothing
            return Reply(None, error=_BAD_ID, status=400)
        parsed = _envelope(doc)
        if parsed is None or parsed[0].method not in self.methods:
            return None
        message, params = parsed
        if message.method == protocol.TASKS_RESULT and not self._streams():
            return None
        if not await post_checks_pass(self.security, headers, self.manager.json_response):
            return None
        version = headers.get(_VERSION_HEADER)
        if version is None or version in HANDSHAKE_PROTOCOL_VERSIONS:
            return await self._handshake(scope, headers, version, message, params, receive, send)
        if not self.router.is_extension(version):
            return None
        return await self._modern(scope, headers, doc, message, params)

    def _streams(self) -> bool:
        """Whether a response may stream here: not on a server that answers JSON only, nor
        on one with an event store (its streams are replayed by the SDK's transport)."""
        return not self.manager.json_response and self.manager.event_store is None

    # ------------------------------------------------------------------ the handshake era
    async def _handshake(
        self,
        scope: Any,
        headers: Mapping[str, str],
        version: str | None,
        message: JSONRPCRequest,
        params: dict[str, Any],
        receive: Any,
        send: Any,
    ) -> Reply | None:
        session_id = headers.get(_SESSION_HEADER)
        if self.manager.stateless:
            if (version or DEFAULT_NEGOTIATED_VERSION) != protocol.REVISION:
                return None
            conn = None
            if message.method == protocol.TOOLS_CALL:  # a born-ready connection, as the SDK's
                conn = envelope_connection(protocol.REVISION, {})
            req = self._request(scope, protocol.REVISION, message, params, None, conn)
            return await self._route(req, None, scope, receive, send)
        if session_id is None:
            return None
        transport = http_session(self.manager, session_id, scope.get("user"))
        conn = self.serving.sessions.connection(session_id)
        if transport is None or conn is None or not initialized(conn):
            return None
        if conn.protocol_version != protocol.REVISION:
            return None
        with InFlight(transport):
            req = self._request(scope, protocol.REVISION, message, params, session_id, conn)
            return await self._route(req, session_id, scope, receive, send, transport)

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
        return task_request(
            version=version,
            method=message.method,
            params=params,
            id=message.id,
            session_id=session_id,
            address=client_address(scope),
            connection=conn,
            headers=headers,
            # only a tools/call runs a tool: no SDK pipeline is built for a tasks/* request
            run_tool=(
                tool_runner(self.serving.server, conn, lifespan_state(self.manager))
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
                self.serving.server, Request(scope), message, route, lifespan
            ):
                return None
            conn = envelope_connection(route.protocol_version, params)
        req = self._request(scope, route.protocol_version, message, params, None, conn, headers)
        return await self._route(req, None, scope)

    # ------------------------------------------------------------------ answering
    async def _route(
        self,
        req: TaskRequest,
        session_id: str | None,
        scope: Any,
        receive: Any = None,
        send: Any = None,
        transport: Any = None,
    ) -> Reply | None:
        """The router's answer; ``None`` when the SDK's path must answer (a ``tools/call``
        that does not become a task, decided before anything ran)."""
        rid = req.id if req.id is not None else 0
        scope[_ROUTED] = True  # from here on the request is this door's to answer
        try:
            if req.method == protocol.TASKS_RESULT and send is not None:
                routed = await self._waiting(req, session_id, scope, receive, send, transport)
            else:
                routed = await self.router.route(req)
        except TaskError as exc:
            status = _error_status(req.version, exc.code)
            return Reply(rid, error=exc.to_error(), status=status, session_id=session_id)
        if isinstance(routed, Pass):
            mark_passed(scope, routed.params)  # the SDK's door does not route it again
            return None
        return Reply(rid, routed, session_id=session_id)

    async def _waiting(
        self,
        req: TaskRequest,
        session_id: str | None,
        scope: Any,
        receive: Any,
        send: Any,
        transport: Any,
    ) -> dict[str, Any] | Pass:
        """A ``tasks/result`` routed with its own stream (:class:`ResultStream`) for its
        task's input requests, started after :data:`STREAM_AFTER_S` if nothing started it;
        :class:`ClientGone` when the client leaves, :class:`SessionEnded` when its session
        ends. No watch and no stream for a task that ended here a moment ago."""
        if self.router.answers_at_once(req) or await self._outcome_soon(req):
            return await self.router.route(req)  # its outcome is here: nothing to wait for
        stream = scope[_STREAM] = ResultStream(send, session_id, self.answers)
        req.send_request = stream.send_request
        ended: type[Exception] | None = None

        async def watch(scope: anyio.CancelScope) -> None:
            """The client leaving, the session ending, the stream's start when it is due:
            one task, looking every :data:`WATCH_S` while it waits for the client."""
            nonlocal ended
            due = anyio.current_time() + STREAM_AFTER_S
            while True:
                left = WATCH_S if stream.started else min(WATCH_S, due - anyio.current_time())
                with anyio.move_on_after(max(left, 0)):
                    if (await receive()).get("type") == "http.disconnect":
                        ended = ClientGone
                        scope.cancel()
                        return
                    continue
                if transport is not None and session_ended(transport):
                    ended = SessionEnded
                    scope.cancel()
                    return
                if not stream.started and anyio.current_time() >= due:
                    await stream.start()

        failure: Exception | None = None
        routed: dict[str, Any] | Pass = {}
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch, tg.cancel_scope)
            try:
                routed = await self.router.route(req)
            except Exception as exc:  # raised past the task group as is
                failure = exc
            tg.cancel_scope.cancel()
        if ended is None and transport is not None and session_ended(transport):
            ended = SessionEnded  # its end cancelled the task: no answer, as the SDK's streams
        if ended is not None:
            raise ended()
        if failure is not None:
            raise failure
        return routed

    async def _outcome_soon(self, req: TaskRequest) -> bool:
        """Whether the task's work returned here and its outcome's write lands within
        :data:`OUTCOME_SOON_S`: then answered unwatched, as one that ended a moment ago."""
        task_id = req.params.get("taskId")
        engine = getattr(self.serving, "engine", None)
        if not isinstance(task_id, str) or engine is None:
            return False
        return bool(await engine.runs.outcome_soon(task_id, OUTCOME_SOON_S))


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


def install(serving: Serving, app: Any, path: str) -> tuple[TaskEndpoint, Any]:
    """Put a :class:`TaskEndpoint` in front of the SDK's endpoint at ``path`` of ``app``; the
    app to serve (``app`` itself, or an :class:`Outermost` around it without auth)."""
    holder, attr, guarded = http_endpoint(app, path)
    endpoint = TaskEndpoint(serving, getattr(holder, attr), session_manager(serving.server))
    setattr(holder, attr, endpoint)
    return endpoint, (app if guarded else Outermost(endpoint, app, path))
