"""What :mod:`._sdk` assumes about the ``mcp`` SDK beyond its documented API, and the
releases they were checked against: ``tests/mcp/test_sdk_canary.py`` has a test named after
each entry. Data only (no SDK import): ``_sdk`` re-exports both names.

Each entry is (what is assumed, why no public name of ``mcp`` serves instead, the upstream
hook that would let the entry go). What is public in every supported release (its name
without an underscore, in a module's ``__all__`` or documented there) is not listed:
``Connection.exit_stack``, ``Connection.from_envelope``, ``Server.session_manager``,
``ServerRunner(...).on_request``, ``mcp.shared.inbound``, ``mcp_types.methods``."""

from __future__ import annotations

import re
from typing import Final

from ... import descriptor

__all__ = ["ASSUMPTIONS", "MCP_SUPPORTED"]

_MCP_REQUIREMENT = re.compile(r"mcp\s*([<>=!~][^;]*)")


def _supported() -> str:
    """The ``mcp`` requirement's specifiers (``>=2.2,<2.4``), from the package's
    ``descriptor.PARTS`` (written from the runtime part's pins in mcptask-gen's
    ``templates/needs.toml``, their one home)."""
    for line in descriptor.PARTS["runtime"].requires:
        found = _MCP_REQUIREMENT.fullmatch(line.partition(";")[0].strip())
        if found is not None:
            specs = found[1].replace(" ", "").split(",")
            return ",".join(sorted(specs, key=lambda spec: not spec.startswith(">")))
    raise LookupError("descriptor.PARTS['runtime'] has no mcp requirement")  # pragma: no cover


MCP_SUPPORTED: Final = _supported()
"""The ``mcp`` releases these assumptions were checked against (the ``mcp`` extra's range)."""

ASSUMPTIONS: Final[tuple[tuple[str, str, str], ...]] = (
    # the serving (McpTasks on a Server or an MCPServer, a task's session)
    (
        "MCPServer._lowlevel_server",
        "McpTasks registers its handlers and extensions on the low-level Server inside an"
        " MCPServer, which has no accessor (the SDK's own Client reads this attribute)",
        "a public MCPServer.lowlevel_server",
    ),
    (
        "ServerSession._connection",
        "a low-level handler gets ctx.session only; the Connection behind it (identity, exit"
        " stack, standalone channel) has no accessor there (MCPServer's Context has one)",
        "ServerSession.connection or ServerRequestContext.connection",
    ),
    (
        "ServerSession._request_outbound",
        "tasks/result relays a task's requests raw on the request-scoped channel (the"
        " tasks/result stream); only typed helpers reach that channel",
        "ServerSession.send_raw_request(..., related=True) or a public request_outbound",
    ),
    (
        "DispatchContext members",
        "TaskOutbound and PollOutbound stand in for the DispatchContext a task's run hands"
        " ServerRunner.on_request (its session is built over it); nothing says which of its"
        " members the session uses",
        "ServerSession typed against the public Outbound protocol",
    ),
    # the client (TaskRequestor, TasksClientSession)
    (
        "ClientSession._stamp",
        "a raw request gets the protocol-version stamp a typed one gets; the SDK has no raw"
        " request method on ClientSession",
        "ClientSession.send_raw_request(method, params, ...) returning the raw result",
    ),
    (
        "ClientSession._dispatcher",
        "results are read raw: send_request validates a result against the SDK's table of"
        " methods, and a task-augmented tools/call's CreateTaskResult fails its CallToolResult"
        " on 2025-11-25; tasks/* have no row there today, and one added would be validated,"
        " its ttlMs floored and later revisions' fields dropped",
        "ClientSession.send_raw_request(method, params, ...) returning the raw result",
    ),
    (
        "ClientSession._on_request",
        "overridden: a server's tasks/* requests reach our task receiver; the stock method"
        " answers them -32601 and nothing registers another server request",
        "a registry of handlers for server requests (ClientSession(request_handlers=...))",
    ),
    (
        "ClientSession._build_capabilities",
        "overridden: initialize declares capabilities.tasks; the constructor takes"
        " extensions only, and no core capability but the callbacks' ones",
        "a ClientSession(capabilities=...) merged into what it declares",
    ),
    (
        "modern stamp _meta envelope",
        "one request declares the tasks extension by adding it to the clientCapabilities"
        " the stamp wrote into params._meta, a shape the SDK does not document",
        "an extensions= argument of one request (send_request, send_raw_request)",
    ),
    (
        "MCPServer._handle_call_tool calls self.call_tool",
        "a tool's arguments that fail validation are answered with pydantic's whole report"
        " (the values sent, error types, a documentation URL); call_tool, wrapped on the"
        " server, is the one place that still has the ValidationError to say it shorter",
        "a hook formatting argument validation errors, or the ToolError carrying them as data",
    ),
    (
        '"Validation error" message prefix',
        "the SDK's HTTP transport reports a bad envelope as a multi-line text; only that"
        " text tells it apart, to answer one short -32600 instead",
        "a marker in the error's data, or a hook formatting the report",
    ),
    # the tasks extension's face (mcp_extension): public names, structural assumptions
    (
        "NAME_BEARING_METHODS lacks tasks/*",
        "the Mcp-Name check of tasks/* requests is ours; were it the SDK's too, a request"
        " would be checked twice, perhaps answered differently",
        "extension methods declared name-bearing to the SDK's ladder",
    ),
    (
        "CORE_RESULT_TYPES lacks task",
        "the runner passes a resultType task answer of tools/call unsieved only while task"
        " is not a core result type; servers have no result claims",
        "server-side result claims, as ClientSession has (ResultClaim)",
    ),
    # the lean path (mcp_lean, task_endpoint): the Streamable HTTP endpoint and its sessions
    (
        "streamable_http_app route endpoint",
        "the task endpoint wraps the SDK's StreamableHTTPASGIApp at Route(path).app (in"
        " RequireAuthMiddleware's .app with auth); the app's layout is not documented",
        "a documented way to wrap the endpoint (streamable_http_app(wrap_endpoint=...))",
    ),
    (
        "StreamableHTTPSessionManager._server_instances",
        "session id -> its transport: whether a session lives, how many there are; the"
        " manager has no lookup",
        "a public session lookup and count on StreamableHTTPSessionManager",
    ),
    (
        "StreamableHTTPSessionManager._session_owners",
        "session id -> the credential that opened it: another credential's session is"
        " refused as the SDK refuses it; no lookup takes the requestor",
        "that lookup taking the requestor, answering as handle_request would",
    ),
    (
        "StreamableHTTPSessionManager._lifespan_state",
        "what the server's lifespan yielded, which the SDK's pipeline takes for a request"
        " the task endpoint serves; the manager keeps it to itself",
        "a public StreamableHTTPSessionManager.lifespan_state",
    ),
    (
        "StreamableHTTPServerTransport idle accounting",
        "a request the task endpoint serves holds the session's idle countdown as"
        " handle_request does (sdk/idle.py, one timer per session): idle_scope,"
        " _idle_timeout, _requests_in_flight",
        "a public in-flight context manager on the transport",
    ),
    (
        "ServerRunner._compose_server_middleware",
        "a task's run leaves out the front door's own middleware (the call already is a"
        " task) and the span middleware (mcp.server._otel's OpenTelemetryMiddleware, a"
        " private module) while no tracer provider is set",
        "ServerRunner taking its middleware, or the span middleware idle without tracing",
    ),
    (
        "_streamable_http_modern._mcp_param_rejection",
        "the SDK's Mcp-Param-* header check of a modern tools/call the task endpoint serves;"
        " only the SDK's private transport module runs it",
        "a public header check of a tools/call (server, request, route) in mcp.server",
    ),
    (
        "StreamableHTTPServerTransport standalone stream",
        "whether a notification on a session's standalone channel reaches anyone:"
        " _request_streams, GET_STREAM_KEY, _event_store",
        "a Connection property: whether its standalone stream is open or replayable",
    ),
    # the front doors (task endpoint, SDK hooks): the transport's checks, its JSON
    (
        "header checks read request.headers.get",
        "a HeaderView (a dict by lower-case name) stands in for the Starlette Request that"
        " check_accept_headers and TransportSecurityMiddleware.validate_request are typed to take",
        "those checks taking a mapping of headers",
    ),
    (
        "streamable_http JSON parse and writers",
        "the 2025-11-25 transport parses with its module's pydantic_core.from_json and"
        " writes with _create_json_response, _create_event_data; sdk/surrogates.py swaps them",
        "that transport taking a lone surrogate as the 2026-07-28 one does",
    ),
)
