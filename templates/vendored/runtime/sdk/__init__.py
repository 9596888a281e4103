"""Everything this package assumes about the ``mcp`` SDK beyond its documented API.

The SDK adapters (the modules of ``serve`` and ``client``)
import the SDK's internals (private attributes, transport modules, structural details) only
from here, so a new ``mcp`` release breaks one module, not several.
``tests/mcp/test_sdk_canary.py`` names each assumption in :data:`ASSUMPTIONS` and
fails with a message like "mcp 2.4.0 changed: ServerSession._connection is gone;
update mcp_tasks.runtime.sdk" when one no longer holds. What differs between releases
of :data:`MCP_SUPPORTED` is bridged here too, by what the installed one has (not its version).

It changes the SDK in one place only, :mod:`.surrogates` (the 2025-11-25 HTTP transport's
JSON, for messages holding a lone surrogate), re-exported here; that change has a canary too.
The SDK's checks of a POST the task endpoint makes itself are in :mod:`.http_checks`, and a
session's idle countdown while the task endpoint serves it in :mod:`.idle`, both
re-exported here.

It is also the one bridge between this package's :class:`TaskError` and the SDK's
:class:`MCPError` (:func:`to_sdk_error`, :func:`from_sdk_error`): no other module converts
between them.
"""

from __future__ import annotations

# isort: off
from .check import SDK_MISSING  # noqa: F401  (first: a missing SDK is one line)
from ..._handlers import dump

# isort: on

from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from functools import partial
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import mcp_types as types
from mcp.client.session import ClientRequestContext, ClientResponse, ClientSession
from mcp.server import streamable_http as _streamable_http
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, authorization_context
from mcp.server.auth.provider import AccessToken, TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult
from mcp.server.runner import ServerRunner
from mcp.server.session import ServerSession
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.shared.dispatcher import CallOptions, DispatchContext
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    MCP_NAME_HEADER,
    MCP_PROTOCOL_VERSION_HEADER,
    decode_header_value,
    encode_header_value,
)
from mcp.shared.message import SessionMessage
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    DEFAULT_NEGOTIATED_VERSION,
    JSONRPCRequest,
)
from mcp_types import methods as _methods
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from opentelemetry import trace
from pydantic import TypeAdapter, ValidationError

from ...errors import InvalidParams, TaskError, error_from_payload
from ...errors import describe_validation_error as _describe
from .assumptions import ASSUMPTIONS, MCP_SUPPORTED
from .http_checks import HeaderView, modern_route, post_checks_pass, transport_security
from .idle import InFlight
from .servers import lowlevel_server, server_of, tidy_argument_errors
from .surrogates import loads_json, take_lone_surrogates

__all__ = [
    "ASSUMPTIONS",
    "CLIENT_CAPABILITIES_META_KEY",
    "CLIENT_INFO_META_KEY",
    "DEFAULT_NEGOTIATED_VERSION",
    "ERROR_CODE_HTTP_STATUS",
    "HANDSHAKE_PROTOCOL_VERSIONS",
    "INITIALIZE",
    "MCP_PROTOCOL_VERSION_HEADER",
    "MCP_SESSION_ID_HEADER",
    "MCP_SUPPORTED",
    "PING",
    "PROGRESS",
    "SessionMessage",
    "AccessToken",
    "AuthSettings",
    "ServerSession",
    "TokenVerifier",
    "TOOLS_LIST",
    "CallNext",
    "ClientSessionHooks",
    "Connection",
    "HandlerResult",
    "HeaderView",
    "InFlight",
    "JSONRPCRequest",
    "MCPError",
    "answer_input_request",
    "connection_from_envelope",
    "connection_of",
    "current_subject",
    "decode_header_value",
    "door_middleware",
    "from_sdk_error",
    "http_endpoint",
    "http_session",
    "initialized",
    "live_session",
    "loads_json",
    "input_round_result_type",
    "is_sdk_validation_report",
    "lifespan_state",
    "listen_ack_method",
    "lowlevel_server",
    "server_of",
    "mcp_param_rejection",
    "mcp_version",
    "method_of",
    "modern_route",
    "on_connection_close",
    "post_checks_pass",
    "request_outbound",
    "session_ended",
    "run_input_callback",
    "sdk_request_runner",
    "send_raw_request",
    "session_count",
    "session_manager",
    "standalone_delivers",
    "take_lone_surrogates",
    "tidy_argument_errors",
    "to_sdk_error",
    "tool_call_params",
    "transport_security",
    "validation_error",
]


def mcp_version() -> str:
    """The installed ``mcp`` distribution's version (``"unknown"`` when not installed)."""
    try:
        return version("mcp")
    except PackageNotFoundError:  # pragma: no cover - vendored copies
        return "unknown"


# ---------------------------------------------------------------------- error bridge


def to_sdk_error(exc: TaskError) -> MCPError:
    """A :class:`TaskError` as the SDK's exception (its code, message and data)."""
    return MCPError(exc.code, exc.message, exc.data)


def from_sdk_error(exc: MCPError) -> TaskError:
    """The SDK's exception as the most specific generated :class:`TaskError`."""
    return error_from_payload(dump(exc.error))


def validation_error(exc: ValidationError, prefix: str = "params") -> TaskError:
    """``-32602`` naming the bad field(s) (the one formatter: ``errors.describe_validation_error``)."""
    return InvalidParams(detail=_describe(exc, prefix))


def tool_call_params(
    params: Mapping[str, Any] | None,
) -> tuple[dict[str, Any], types.CallToolRequestParams]:
    """A ``tools/call`` request's params as sent and parsed; ``-32602`` naming the bad
    field(s) (a ``TaskError``) when they do not parse."""
    raw = dict(params or {})
    try:
        return raw, types.CallToolRequestParams.model_validate(raw)
    except ValidationError as exc:
        raise validation_error(exc) from None


# ---------------------------------------------------------------------- server side


def method_of(model: type[Any]) -> str:
    """The method name an ``mcp_types`` request/notification model is fixed to."""
    default = model.model_fields["method"].default
    if not isinstance(default, str):  # pragma: no cover - guarded by the canary test
        raise TypeError(f"{model.__name__}.method has no fixed name")
    return default


PING: str = method_of(types.PingRequest)
PROGRESS: str = method_of(types.ProgressNotification)
INITIALIZE: str = method_of(types.InitializeRequest)
TOOLS_LIST: str = method_of(types.ListToolsRequest)


#: the SDK's ``get_access_token`` (None without its auth extras), looked up once
_access_token: Callable[[], Any] | None = None
try:
    from mcp.server.auth.middleware.auth_context import get_access_token

    _access_token = get_access_token
except ImportError:  # pragma: no cover - auth extras missing
    pass


def current_subject() -> str | None:
    """The bearer token's subject (else its client id) of the request being served, when
    the SDK's auth middleware verified one; None otherwise. (Hot: every request asks.)"""
    if _access_token is None:  # pragma: no cover - auth extras missing
        return None
    token = _access_token()
    if token is None:
        return None
    return token.subject or token.client_id or None


def connection_from_envelope(
    version: str, client_info: Any, client_capabilities: Mapping[str, Any] | None
) -> Connection:
    """A born-ready connection for one request (a stateless or per-request-envelope one),
    as the SDK builds it (``Connection.from_envelope``)."""
    return Connection.from_envelope(version, client_info, client_capabilities)


def listen_ack_method() -> str:
    """The method of a listen stream's first message (``SubscriptionsAcknowledgedNotification``)."""
    return method_of(types.SubscriptionsAcknowledgedNotification)


def input_round_result_type() -> str:
    """The ``resultType`` of an MRTR input round (the SDK's ``InputRequiredResult``)."""
    value: str = types.InputRequiredResult.model_fields["result_type"].default
    return value


def connection_of(session: ServerSession) -> Connection:
    """The stable per-connection object behind a per-request ``ServerSession``."""
    conn: Connection = session._connection
    return conn


def request_outbound(session: ServerSession) -> Any:
    """The request-scoped channel (the ``tasks/result`` response stream) of a session."""
    return session._request_outbound


def on_connection_close(conn: Connection) -> AsyncExitStack:
    """The stack the SDK unwinds (shielded) when ``conn`` ends: stdio EOF, HTTP session
    DELETE or termination (``Connection.exit_stack``, public)."""
    return conn.exit_stack


def is_sdk_validation_report(message: object) -> bool:
    """Whether an HTTP error message is the SDK's multi-line envelope validation report."""
    return str(message).startswith("Validation error")


# ---------------------------------------------------------------------- client side


async def send_raw_request(
    session: ClientSession,
    method: str,
    params: Mapping[str, Any] | None,
    *,
    timeout: float | None = None,
    declare: Mapping[str, Mapping[str, Any]] | None = None,
    name: str | None = None,
) -> dict[str, Any]:
    """Send any request on ``session`` and return the raw result (no SDK validation).

    On a modern (per-request ``_meta``) connection, ``declare`` adds extensions to this one
    request's capability envelope and ``name`` becomes its ``Mcp-Name`` header; on a
    handshake connection both are ignored (the envelope and the header do not exist there).
    """
    data: dict[str, Any] = {"method": method}
    if params is not None:
        data["params"] = dict(params)
    opts: CallOptions = {}
    session._stamp(data, opts)
    _extend_envelope(data, opts, declare, name)
    if timeout is not None:
        opts["timeout"] = timeout
    result: dict[str, Any] = await session._dispatcher.send_raw_request(
        method, data.get("params"), opts
    )
    return result


def _extend_envelope(
    data: dict[str, Any],
    opts: CallOptions,
    declare: Mapping[str, Mapping[str, Any]] | None,
    name: str | None,
) -> None:
    meta = (data.get("params") or {}).get("_meta")
    caps = meta.get(CLIENT_CAPABILITIES_META_KEY) if isinstance(meta, dict) else None
    if not isinstance(caps, dict):
        return  # a handshake-era stamp: no per-request envelope
    if declare:
        extensions = dict(caps.get("extensions") or {})
        extensions.update({k: dict(v) for k, v in declare.items()})
        meta[CLIENT_CAPABILITIES_META_KEY] = {**caps, "extensions": extensions}  # type: ignore[index]
    if name is not None:
        opts.setdefault("headers", {})[MCP_NAME_HEADER] = encode_header_value(name)


_INPUT_REQUEST: TypeAdapter[types.InputRequest] = TypeAdapter(types.InputRequest)


async def answer_input_request(
    session: ClientSession, key: str, request: Mapping[str, Any]
) -> dict[str, Any]:
    """Answer one ``inputRequests`` entry with the session's own elicitation/sampling/roots
    callbacks, exactly as the standalone server request; the wire result, or the
    callback's refusal raised as a :class:`TaskError`."""
    parsed = _INPUT_REQUEST.validate_python(dict(request))
    ctx = ClientRequestContext(session=session, request_id=key)
    response = await session.dispatch_input_request(ctx, parsed)
    if isinstance(response, types.ErrorData):
        raise error_from_payload(dump(response))
    return dump(response)


async def run_input_callback(
    session: ClientSession,
    method: str,
    version: str,
    params: Mapping[str, Any],
    request_id: str | int,
) -> dict[str, Any]:
    """Run the session's elicitation/sampling callback for a server request; the wire
    result, or the callback's refusal raised as a :class:`TaskError`."""
    request = _methods.parse_server_request(method, version, dict(params))
    meta = request.params.meta if request.params is not None else None
    ctx = ClientRequestContext(session=session, request_id=request_id, meta=meta)
    response = await session.dispatch_input_request(ctx, request)  # type: ignore[arg-type]
    answer = ClientResponse.validate_python(response)
    if isinstance(answer, types.ErrorData):
        raise error_from_payload(dump(answer))
    return dump(answer)


class ClientSessionHooks(ClientSession):
    """A ``ClientSession`` with two public hooks in place of its private ones:
    :meth:`extend_capabilities` (after ``_build_capabilities``) and
    :meth:`intercept_request` (before ``_on_request``; ``None`` lets the SDK answer)."""

    def extend_capabilities(self, caps: types.ClientCapabilities, version: str) -> None:
        """Add to the capabilities declared in ``initialize``."""

    async def intercept_request(
        self, request_id: str | int | None, method: str, params: Mapping[str, Any] | None
    ) -> dict[str, Any] | None:
        """Answer a server request, or ``None`` for the SDK's own handling."""
        return None

    def _build_capabilities(self, version: str) -> types.ClientCapabilities:
        caps = super()._build_capabilities(version)
        self.extend_capabilities(caps, version)
        return caps

    async def _on_request(
        self, dctx: DispatchContext[Any], method: str, params: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        try:
            answer = await self.intercept_request(dctx.request_id, method, params)
        except TaskError as exc:
            raise to_sdk_error(exc) from None
        if answer is not None:
            return answer
        return await super()._on_request(dctx, method, params)


# ---------------------------------------------------------------------- lean path (HTTP)


def http_endpoint(app: Any, path: str) -> tuple[Any, str, bool]:
    """(holder, attribute, guarded) of the SDK's Streamable HTTP endpoint in ``app`` (a
    Starlette app from ``streamable_http_app``): ``Route(path).app``, or inside the SDK's
    ``RequireAuthMiddleware`` there (``.app``) so that bearer auth stays in front of it;
    ``guarded`` when any middleware (auth) runs before the endpoint."""
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
    from starlette.routing import Route

    for route in getattr(app, "routes", ()):
        if isinstance(route, Route) and route.path == path:
            holder: Any = route
            while not isinstance(getattr(holder, "app", None), StreamableHTTPASGIApp):
                holder = getattr(holder, "app", None)
                if holder is None:
                    break
            else:
                guarded = holder is not route or bool(getattr(app, "user_middleware", None))
                return holder, "app", guarded
    raise TypeError(f"no mcp Streamable HTTP endpoint at {path!r} in {type(app).__name__}")


def session_manager(server: Any, required: bool = True) -> Any:
    """The ``StreamableHTTPSessionManager`` the last ``streamable_http_app()`` call made
    (``Server.session_manager``); before one, a ``TypeError``, or None if not ``required``."""
    try:
        return lowlevel_server(server).session_manager
    except RuntimeError:  # the SDK's "only after calling streamable_http_app()"
        if required:
            raise TypeError("streamable_http_app() has not been called on this server") from None
        return None


def live_session(manager: Any, session_id: str) -> bool:
    """Whether the session manager still holds ``session_id`` (not ended nor idled out)."""
    return session_id in manager._server_instances


def session_count(manager: Any) -> int:
    """How many sessions the session manager holds."""
    return len(manager._server_instances)


def lifespan_state(manager: Any) -> Any:
    """What the server's lifespan yielded (set when the session manager runs)."""
    return manager._lifespan_state


def http_session(manager: Any, session_id: str, user: Any) -> Any | None:
    """The live transport of ``session_id`` when the SDK would serve a request for it with
    this credential (``scope["user"]``); ``None`` when it would refuse it (unknown,
    deleted, terminated, idled out, another credential's): the caller then lets the SDK
    answer, so refusals keep the SDK's own shape."""
    transport = manager._server_instances.get(session_id)
    if transport is None or transport.is_terminated:
        return None
    owner = authorization_context(user) if isinstance(user, AuthenticatedUser) else None
    if owner != manager._session_owners.get(session_id):
        return None
    idle = transport.idle_scope
    if idle is not None and idle.cancel_called:
        return None
    return transport


def session_ended(transport: Any) -> bool:
    """Whether the HTTP session of ``transport`` (:func:`http_session`'s) has ended:
    deleted or terminated (``StreamableHTTPServerTransport.is_terminated``)."""
    return bool(transport.is_terminated)


def standalone_delivers(server: Any, conn: Connection, *, replay: bool = True) -> bool:
    """Whether a notification on ``conn``'s standalone channel reaches anyone: false for an
    HTTP session with no ``GET`` stream open and no event store to replay it from (the SDK
    drops it; ``replay=False``: a ``GET`` stream open now) or a session gone; true for
    anything else (stdio, unknown set-ups)."""
    if conn.session_id is None:
        return True
    manager = session_manager(server, required=False)
    if manager is None:
        return True
    transport = manager._server_instances.get(conn.session_id)
    if transport is None:
        return False
    stored = replay and transport._event_store is not None
    # read from the module imported once (a release without the key fails here, and in the
    # canary, not on this module's import)
    return stored or _streamable_http.GET_STREAM_KEY in transport._request_streams


def initialized(conn: Connection) -> bool:
    """Whether the session behind ``conn`` finished its handshake."""
    return bool(conn.initialize_accepted)


def tracing() -> bool:
    """Whether the SDK's spans record: its tracer is the API's proxy, a no-op (that costs)
    until a tracer provider is set (``trace._TRACER_PROVIDER``; if that goes: assume so)."""
    return getattr(trace, "_TRACER_PROVIDER", True) is not None


def _call_middleware(middleware: Any, call_next: CallNext, ctx: Any) -> Any:
    """A ``ServerMiddleware`` as a ``CallNext`` link, ``ctx`` taken at call time."""
    return middleware(ctx, call_next)


#: the mark of a front door's own middleware (:func:`door_middleware`)
_DOOR_MARK = "__mcp_tasks_door__"


def door_middleware(method: Any) -> Any:
    """Mark ``method`` (a front door's ``Server.middleware``) as one a task's own run leaves
    out: the call it would route already is a task (:func:`sdk_request_runner`)."""
    setattr(method, _DOOR_MARK, True)
    return method


class _TaskRunner(ServerRunner[Any]):
    """The SDK's pipeline for a task's own run: the server's middleware but a front door's
    own (:func:`door_middleware`), and the span middleware only while :func:`tracing` is on.

    One is made per task, so its ``on_request`` is not cached on it: the SDK's cached
    bound method would make the runner a reference cycle, garbage for the cyclic collector
    (not freed as the task ends) after every task."""

    @property
    def on_request(self) -> Any:
        return self._on_request

    def _compose_server_middleware(self, inner: CallNext) -> CallNext:
        spans = tracing()
        for middleware in reversed(self.server.middleware):
            if getattr(middleware, _DOOR_MARK, False):
                continue
            if spans or type(middleware) is not OpenTelemetryMiddleware:
                inner = partial(_call_middleware, middleware, inner)
        return inner


def sdk_request_runner(server: Any, conn: Connection, lifespan: Any) -> Any:
    """``on_request(dctx, method, params)`` of the SDK's own pipeline for ``conn``: the
    middleware (not a front door's; the span's only with :func:`tracing`), validation, the
    handler, its checks."""
    return _TaskRunner(lowlevel_server(server), conn, lifespan).on_request


#: id(input schema) -> (the schema, whether it declares Mcp-Param headers); bounded
_HEADER_PARAMS: dict[int, tuple[Any, bool]] = {}


def _declares_header_params(schema: Any) -> bool:
    """Whether a tool's input schema has a valid ``x-mcp-header`` property: only then can
    the SDK's header check reject anything (remembered per schema object)."""
    hit = _HEADER_PARAMS.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    from mcp.shared.inbound import find_invalid_x_mcp_header, x_mcp_header_map

    declares = find_invalid_x_mcp_header(schema) is None and bool(x_mcp_header_map(schema))
    if len(_HEADER_PARAMS) < 4096:
        _HEADER_PARAMS[id(schema)] = (schema, declares)
    return declares


async def mcp_param_rejection(
    server: Any, request: Any, message: Any, route: Any, lifespan: Any
) -> Any | None:
    """The SDK's ``Mcp-Param-*`` header check of a modern ``tools/call`` (a rejection or
    None); skipped when the tool's schema (from ``Server.get_tool_input_schema``) declares
    no header parameter, where it can only pass (``mcp`` 2.2 has no lookup: it always runs)."""
    from mcp.server._streamable_http_modern import _mcp_param_rejection

    low = lowlevel_server(server)
    name = (message.params or {}).get("name")
    lookup = getattr(low, "get_tool_input_schema", None)  # mcp >= 2.3
    if lookup is not None and isinstance(name, str):
        try:
            schema: Any = lookup(name)
        except Exception:  # the SDK's check logs it
            return await _mcp_param_rejection(low, request, message, route, lifespan)
        if schema is None or not _declares_header_params(schema):
            return None
    return await _mcp_param_rejection(low, request, message, route, lifespan)
