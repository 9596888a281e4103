"""Canary for every assumption ``mcp_tasks.runtime.sdk`` makes about the ``mcp`` SDK.

Each test names one entry of ``_sdk.ASSUMPTIONS`` (private attributes, overridden
private hooks, structural details) and fails with "mcp X.Y changed: ...; update
mcp_tasks.runtime.sdk" when a new ``mcp`` release breaks it, instead of a task
hanging somewhere in an end-to-end test. ``.ci/run`` runs it on the oldest ``mcp`` the
requirement admits as well as on the newest (``.ci/constraints.txt``).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver import MCPServer
from mcp.server.session import ServerSession
from mcp.server.streamable_http import check_accept_headers
from mcp.shared.dispatcher import DispatchContext
from mcp.shared.exceptions import MCPError

from mcp_tasks.errors import InvalidParams, TaskError, TaskNotFound
from mcp_tasks.extension import protocol as ext
from mcp_tasks.runtime import sdk as _sdk
from mcp_tasks.runtime.serve.outbound import PollOutbound, TaskOutbound

VERSION = _sdk.mcp_version()


def changed(what: str) -> str:
    return (
        f"mcp {VERSION} changed: {what}; update mcp_tasks.runtime.sdk "
        f"(checked against mcp{_sdk.MCP_SUPPORTED})"
    )


def _params(fn: Callable[..., Any]) -> list[str]:
    return [p for p in inspect.signature(fn).parameters if p != "self"]


def _init_assigns(cls: type[Any], attr: str) -> bool:
    """Whether ``cls.__init__`` sets ``self.<attr>`` (private attributes have no other trace)."""
    source = inspect.getsource(vars(cls)["__init__"])
    return f"self.{attr} =" in source or f"self.{attr}:" in source


def test_every_assumption_has_a_canary() -> None:
    named = {name for name, _why, _hook in _sdk.ASSUMPTIONS}
    tested = {
        obj.__doc__.split(":", 1)[0].strip()
        for name, obj in globals().items()
        if name.startswith("test_") and obj.__doc__ and ":" in obj.__doc__
    }
    assert named <= tested, f"assumptions without a canary test: {sorted(named - tested)}"
    assert len(named) == len(_sdk.ASSUMPTIONS), "an assumption is listed twice"


def test_every_assumption_says_why_and_what_would_end_it() -> None:
    """Each entry says why no public name of ``mcp`` serves instead and which upstream hook
    would let it go; docs/serving.md lists them, word for word."""
    for name, why, hook in _sdk.ASSUMPTIONS:
        assert why.strip() and hook.strip(), name
    doc = (Path(__file__).resolve().parents[2] / "docs" / "serving.md").read_text("utf-8")
    rows = re.findall(r"(?m)^\| `(.+?)` \| (.+?) \| (.+?) \|$", doc)
    assert rows == [(name, why, hook) for name, why, hook in _sdk.ASSUMPTIONS], (
        "docs/serving.md's table of SDK internals is not _sdk_assumptions.ASSUMPTIONS"
    )


def test_the_supported_range_is_the_mcp_extras() -> None:
    """MCP_SUPPORTED is the ``mcp`` extra's requirement, read from the package's descriptor,
    which the generator wrote from the runtime part's pins (``templates/needs.toml``)."""
    import tomllib

    needs = Path(__file__).resolve().parents[2] / "templates" / "needs.toml"
    requires = tomllib.loads(needs.read_text("utf-8"))["requires"]
    (line,) = (r for r in requires["runtime"] if re.match(r"mcp\s*[<>=!~]", r))
    assert line == f"mcp{_sdk.MCP_SUPPORTED}", (line, _sdk.MCP_SUPPORTED)


def test_mcpserver_lowlevel_server() -> None:
    """MCPServer._lowlevel_server: the low-level Server of an MCPServer."""
    inner = getattr(MCPServer("canary"), "_lowlevel_server", None)
    assert isinstance(inner, Server), changed("MCPServer._lowlevel_server is gone")
    assert _sdk.lowlevel_server(MCPServer("canary")) is not None


def test_serversession_connection() -> None:
    """ServerSession._connection: the stable per-connection object."""
    assert _init_assigns(ServerSession, "_connection"), changed("ServerSession._connection is gone")


def test_serversession_request_outbound() -> None:
    """ServerSession._request_outbound: the request-scoped channel."""
    assert _init_assigns(ServerSession, "_request_outbound"), changed(
        "ServerSession._request_outbound is gone"
    )


def test_dispatch_context_members() -> None:
    """DispatchContext members: TaskOutbound duck-types every one of them."""
    wanted = {name for name, _ in inspect.getmembers(DispatchContext) if not name.startswith("_")}
    for outbound in (TaskOutbound, PollOutbound):
        missing = sorted(
            n
            for n in wanted
            if not hasattr(outbound, n) and n not in {"request_id", "message_metadata"}
        )
        assert not missing, changed(
            f"DispatchContext gained {missing} ({outbound.__name__} lacks them)"
        )


def test_clientsession_stamp() -> None:
    """ClientSession._stamp: protocol-version stamping of a raw request."""
    assert _init_assigns(ClientSession, "_stamp"), changed("ClientSession._stamp is gone")


def test_clientsession_dispatcher() -> None:
    """ClientSession._dispatcher: raw requests without result validation."""
    assert _init_assigns(ClientSession, "_dispatcher"), changed("ClientSession._dispatcher is gone")


def test_clientsession_on_request() -> None:
    """ClientSession._on_request: overridden by ClientSessionHooks."""
    fn = getattr(ClientSession, "_on_request", None)
    assert fn is not None, changed("ClientSession._on_request is gone")
    assert _params(fn) == ["dctx", "method", "params"], changed(
        f"ClientSession._on_request takes {_params(fn)}"
    )


def test_clientsession_build_capabilities() -> None:
    """ClientSession._build_capabilities: overridden by ClientSessionHooks."""
    fn = getattr(ClientSession, "_build_capabilities", None)
    assert fn is not None, changed("ClientSession._build_capabilities is gone")
    assert _params(fn) == ["version"], changed(
        f"ClientSession._build_capabilities takes {_params(fn)}"
    )


def test_modern_stamp_envelope() -> None:
    """modern stamp _meta envelope: a raw request's clientCapabilities can be extended.

    X-CAP-1, X-CAP-11: the tasks extension is declared on one request by adding it to the
    envelope the SDK's modern stamp writes; X-HTTP-1: ``Mcp-Name`` for ``tasks/*``."""
    from mcp.client import session as client_session
    from mcp_types import CLIENT_CAPABILITIES_META_KEY

    from mcp_tasks.extension import protocol as ext

    make = getattr(client_session, "_make_modern_stamp", None)
    assert make is not None, changed("mcp.client.session._make_modern_stamp is gone")
    stamp = make(ext.REVISION, {"name": "c", "version": "0"}, {}, lambda name, args: {})
    data: dict[str, Any] = {"method": ext.TASKS_GET, "params": {"taskId": "t-1"}}
    opts: dict[str, Any] = {}
    stamp(data, opts)
    caps = data["params"]["_meta"].get(CLIENT_CAPABILITIES_META_KEY)
    assert isinstance(caps, dict), changed("the modern stamp writes no clientCapabilities dict")
    _sdk._extend_envelope(data, opts, {ext.EXTENSION_ID: {}}, "t-1")  # type: ignore[arg-type]
    declared = data["params"]["_meta"][CLIENT_CAPABILITIES_META_KEY]["extensions"]
    assert declared == {ext.EXTENSION_ID: {}}
    assert opts["headers"]["mcp-name"] == "t-1", changed(f"stamp headers are {opts['headers']}")


def test_claim_model_is_accepted() -> None:
    """The SDK's ResultClaim checks accept our claim of the extension's task answer (X-RT-1)."""
    from mcp_tasks.extension import protocol as ext
    from mcp_tasks.runtime.client.extension import TasksClientExtension

    try:
        (claim,) = TasksClientExtension().claims()
    except ValueError as exc:
        pytest.fail(changed(f"ResultClaim refuses the task claim: {exc}"))
    assert claim.result_type == ext.RESULT_TYPE_TASK
    assert claim.protocol_versions == frozenset({ext.REVISION})


def test_mcpserver_handle_call_tool_calls_call_tool() -> None:
    """MCPServer._handle_call_tool calls self.call_tool: a tool's bad arguments, wrapped on
    the instance (``tidy_argument_errors``), reach the client as their names and reasons."""
    source = inspect.getsource(MCPServer._handle_call_tool)
    assert "self.call_tool(" in source, changed(
        "MCPServer's tools/call handler no longer calls self.call_tool"
    )
    from mcp.server.mcpserver.exceptions import ToolError

    mcp = MCPServer("canary")

    @mcp.tool()
    def double(n: int) -> int:
        return 2 * n

    _sdk.tidy_argument_errors(mcp)
    _sdk.tidy_argument_errors(mcp)  # idempotent
    with pytest.raises(ToolError) as raised:
        anyio.run(mcp.call_tool, "double", {"n": "two"})
    assert str(raised.value) == (
        "Error executing tool double: arguments.n: Input should be a valid integer,"
        " unable to parse string as an integer"
    ), changed("call_tool's ToolError no longer carries the ValidationError as its cause")


def test_validation_report_prefix() -> None:
    """ "Validation error" message prefix: the SDK's HTTP report of a bad envelope."""
    import mcp.server.streamable_http as http

    assert "Validation error" in inspect.getsource(http), changed(
        "the Streamable HTTP transport no longer says 'Validation error'"
    )
    assert _sdk.is_sdk_validation_report("Validation error: 1 validation error for ...")


def test_error_bridge_round_trip() -> None:
    for exc in (TaskNotFound(), InvalidParams(detail="params.taskId: Field required")):
        sdk = _sdk.to_sdk_error(exc)
        assert isinstance(sdk, MCPError)
        back = _sdk.from_sdk_error(sdk)
        assert isinstance(back, TaskError) and type(back) is type(exc)
        assert (back.code, back.message, back.data) == (exc.code, exc.message, exc.data)


def test_name_bearing_methods() -> None:
    """NAME_BEARING_METHODS lacks tasks/*: the SDK does not check Mcp-Name on them."""
    from mcp.shared.inbound import NAME_BEARING_METHODS

    ours = set(NAME_BEARING_METHODS) & set(ext.TASK_REQUEST_METHODS)
    assert not ours, changed(f"the SDK checks Mcp-Name on {sorted(ours)} itself now")


def test_core_result_types() -> None:
    """CORE_RESULT_TYPES lacks task: the runner passes a task answer of tools/call as is."""
    from mcp_types import CORE_RESULT_TYPES

    assert ext.RESULT_TYPE_TASK not in CORE_RESULT_TYPES, changed(
        "resultType task is a core result type now (sieved as CallToolResult?)"
    )


# ---------------------------------------------------------------------- the task endpoint


def _http_app() -> tuple[MCPServer, Any]:
    mcp = MCPServer("canary")
    return mcp, mcp.streamable_http_app()


def test_http_endpoint_route() -> None:
    """streamable_http_app route endpoint: Route(path).app, maybe inside an auth .app."""
    _mcp, app = _http_app()
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp

    holder, attr, guarded = _sdk.http_endpoint(app, "/mcp")
    assert not guarded
    assert isinstance(getattr(holder, attr), StreamableHTTPASGIApp), changed(
        "the Streamable HTTP route no longer holds a StreamableHTTPASGIApp"
    )


def test_manager_server_instances() -> None:
    """StreamableHTTPSessionManager._server_instances: session id -> transport."""
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    assert _init_assigns(StreamableHTTPSessionManager, "_server_instances"), changed(
        "StreamableHTTPSessionManager._server_instances is gone"
    )


def test_manager_session_owners() -> None:
    """StreamableHTTPSessionManager._session_owners: session id -> the credential."""
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    assert _init_assigns(StreamableHTTPSessionManager, "_session_owners"), changed(
        "StreamableHTTPSessionManager._session_owners is gone"
    )


def test_manager_lifespan_state() -> None:
    """StreamableHTTPSessionManager._lifespan_state: what the lifespan yielded."""
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    assert _init_assigns(StreamableHTTPSessionManager, "_lifespan_state"), changed(
        "StreamableHTTPSessionManager._lifespan_state is gone"
    )


def test_transport_idle_accounting() -> None:
    """StreamableHTTPServerTransport idle accounting: idle_scope, _idle_timeout, in-flight."""
    from mcp.server.streamable_http import StreamableHTTPServerTransport

    source = inspect.getsource(StreamableHTTPServerTransport.handle_request)
    for name in ("idle_scope", "_idle_timeout", "_requests_in_flight"):
        assert name in source, changed(f"StreamableHTTPServerTransport.{name} is gone")
    # the countdown's semantics _sdk_idle keeps: held at infinity while a request is in
    # flight, restarted as the last one leaves; and one watch per transport, weakly keyed
    assert "deadline = math.inf" in source and "+ self._idle_timeout" in source, changed(
        "handle_request no longer holds and restarts idle_scope's deadline"
    )
    assert hasattr(StreamableHTTPServerTransport, "__weakref__"), changed(
        "StreamableHTTPServerTransport can no longer be weakly referenced"
    )


def test_serverrunner_compose_server_middleware() -> None:
    """ServerRunner._compose_server_middleware: a task's run leaves out the no-op span."""
    from mcp.server._otel import OpenTelemetryMiddleware
    from mcp.server.runner import ServerRunner

    compose = getattr(ServerRunner, "_compose_server_middleware", None)
    assert compose is not None, changed("ServerRunner._compose_server_middleware is gone")
    assert _params(compose) == ["inner"], changed("_compose_server_middleware(inner) changed")
    assert "_compose_server_middleware(" in inspect.getsource(ServerRunner._on_request), changed(
        "ServerRunner.on_request no longer composes the middleware there"
    )
    assert any(isinstance(m, OpenTelemetryMiddleware) for m in Server("canary").middleware), (
        changed("Server.middleware no longer starts with the OpenTelemetry span middleware")
    )


def test_mcp_param_rejection() -> None:
    """_streamable_http_modern._mcp_param_rejection: the Mcp-Param header check."""
    from mcp.server import _streamable_http_modern as modern

    fn = getattr(modern, "_mcp_param_rejection", None)
    assert fn is not None, changed("_streamable_http_modern._mcp_param_rejection is gone")
    assert _params(fn) == ["app", "request", "req", "verdict", "lifespan_state"], changed(
        "_mcp_param_rejection's parameters changed"
    )


def test_transport_standalone_stream() -> None:
    """StreamableHTTPServerTransport standalone stream: _request_streams, GET key, event store."""
    from mcp.server import streamable_http

    assert isinstance(getattr(streamable_http, "GET_STREAM_KEY", None), str), changed(
        "streamable_http.GET_STREAM_KEY is gone"
    )
    for attr in ("_request_streams", "_event_store"):
        assert _init_assigns(streamable_http.StreamableHTTPServerTransport, attr), changed(
            f"StreamableHTTPServerTransport.{attr} is gone"
        )


# ---------------------------------------------------------------------- the front doors


def test_streamable_http_json_parse_and_writers() -> None:
    """streamable_http JSON parse and writers: the 2025-11-25 transport parses a POST with
    its module's pydantic_core.from_json and writes messages with _create_json_response and
    _create_event_data; take_lone_surrogates makes all three take a lone surrogate."""
    from mcp.server import streamable_http as sh

    post = inspect.getsource(sh.StreamableHTTPServerTransport._handle_post_request)
    assert "pydantic_core.from_json(body)" in post, changed("the POST body's JSON parser")
    for writer in ("_create_json_response", "_create_event_data"):
        assert "model_dump_json(" in inspect.getsource(
            getattr(sh.StreamableHTTPServerTransport, writer)
        ), changed(f"StreamableHTTPServerTransport.{writer}")
    _sdk.take_lone_surrogates()
    _sdk.take_lone_surrogates()  # once per process, however often asked
    assert sh.pydantic_core.from_json(b'{"a":"\\ud800"}') == {"a": "\ud800"}
    with pytest.raises(ValueError):
        sh.pydantic_core.from_json(b'{"a":"\\ud800"')  # bad JSON stays bad
    transport = sh.StreamableHTTPServerTransport(mcp_session_id=None)
    message = types.JSONRPCResponse(jsonrpc="2.0", id=1, result={"text": "\ud800"})
    body = bytes(transport._create_json_response(message).body)
    assert body == b'{"jsonrpc":"2.0","id":1,"result":{"text":"\\ud800"}}', body
    event = transport._create_event_data(sh.EventMessage(message, "e1"))
    assert event["data"] == body.decode() and event["id"] == "e1", event
    plain = types.JSONRPCResponse(jsonrpc="2.0", id=2, result={"text": "é"})
    assert "é" in bytes(transport._create_json_response(plain).body).decode()  # as before


class _OnlyGet:
    """Headers that allow ``get`` of a lower-case name and nothing else."""

    def __init__(self, headers: dict[str, str]) -> None:
        self._headers = headers

    def get(self, name: str, default: Any = None) -> Any:
        assert name == name.lower(), changed(f"a header check reads {name!r}")
        return self._headers.get(name, default)


_HEADER_CASES: list[list[tuple[bytes, bytes]]] = [
    [(b"content-type", b"application/json"), (b"accept", b"application/json, text/event-stream")],
    [(b"content-type", b"application/json; charset=utf-8"), (b"accept", b"*/*")],
    [(b"content-type", b"text/plain"), (b"accept", b"application/json")],
    [(b"accept", b"text/*;q=0.5, application/*")],
    [(b"content-type", b"application/json"), (b"content-type", b"text/plain")],
    [(b"host", b"127.0.0.1:8000"), (b"content-type", b"application/json")],
    [(b"host", b"evil.example"), (b"content-type", b"application/json")],
    [(b"host", b"localhost:9"), (b"origin", b"http://evil.example")],
    [(b"host", b"localhost:9"), (b"origin", b"http://localhost:9"), (b"host", b"evil.example")],
    [],
]


@pytest.mark.anyio
async def test_header_checks_read_request_headers_get() -> None:
    """header checks read request.headers.get: a HeaderView answers them as a Request."""
    from mcp.server.transport_security import (
        TransportSecurityMiddleware,
        TransportSecuritySettings,
    )
    from starlette.requests import Request

    from mcp_tasks.runtime.serve.endpoint import _headers

    strict = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*", "localhost:9"],
        allowed_origins=["http://localhost:9"],
    )
    checks = [
        TransportSecurityMiddleware(None),
        TransportSecurityMiddleware(strict),
    ]
    for raw in _HEADER_CASES:
        scope = {"type": "http", "method": "POST", "headers": raw}
        request, view = Request(scope), _sdk.HeaderView(_OnlyGet(_headers(scope)))
        want = check_accept_headers(request)
        assert check_accept_headers(view) == want, changed(f"Accept of {raw}")
        for security in checks:
            expected = await security.validate_request(request, is_post=True)
            got = await security.validate_request(view, is_post=True)
            assert (got is None) == (expected is None), changed(f"validate_request of {raw}")
            if got is not None and expected is not None:
                assert got.status_code == expected.status_code, changed(f"status of {raw}")
            passes = expected is None and want[0]
            headers = _headers(scope)
            assert await _sdk.post_checks_pass(security, headers, True) == passes  # JSON only
            assert await _sdk.post_checks_pass(security, headers, False) == (passes and want[1])
