"""What :mod:`._sdk` assumes about the ``mcp`` SDK beyond its documented API, one line
each, and the releases they were checked against: ``tests/mcp/test_sdk_canary.py`` has a
test named after each entry. Data only (no SDK import): ``_sdk`` re-exports both names."""

from __future__ import annotations

import re
from typing import Final

from .. import descriptor

__all__ = ["ASSUMPTIONS", "MCP_SUPPORTED"]

_MCP_REQUIREMENT = re.compile(r"mcp\s*([<>=!~][^;]*)")


def _supported() -> str:
    """The ``mcp`` requirement's specifiers (``>=2.2,<2.4``), from the package's
    ``descriptor.PARTS`` (written from ``pyproject.toml``'s ``mcp`` extra, their one home)."""
    for line in descriptor.PARTS["runtime"].requires:
        found = _MCP_REQUIREMENT.fullmatch(line.partition(";")[0].strip())
        if found is not None:
            specs = found[1].replace(" ", "").split(",")
            return ",".join(sorted(specs, key=lambda spec: not spec.startswith(">")))
    raise LookupError("descriptor.PARTS['runtime'] has no mcp requirement")  # pragma: no cover


MCP_SUPPORTED: Final = _supported()
"""The ``mcp`` releases these assumptions were checked against (``pyproject.toml``)."""

ASSUMPTIONS: tuple[tuple[str, str], ...] = (
    ("MCPServer._lowlevel_server", "the low-level Server inside an MCPServer"),
    ("ServerSession._connection", "the stable per-connection object (no public accessor)"),
    ("ServerSession._request_outbound", "the request-scoped channel of a task-result call"),
    ("ServerSession(outbound, connection)", "a task-scoped session is built this way"),
    ("DispatchContext members", "the task-scoped outbound duck-types DispatchContext"),
    ("Connection.exit_stack", "unwound when the connection (stdio, HTTP session) ends"),
    ("mcp.shared._context_streams.create_context_streams", "the stdio relay's stream pair"),
    ("ClientSession._stamp", "protocol-version stamping of a raw request"),
    ("ClientSession._dispatcher", "raw requests that skip the SDK's result validation"),
    ("ClientSession._on_request", "overridden: the stock one answers tasks/* with -32601"),
    ("ClientSession._build_capabilities", "overridden: extended with capabilities.tasks"),
    ("ClientSession.dispatch_input_request", "runs the elicitation/sampling callbacks"),
    ("modern stamp _meta envelope", "a raw request's clientCapabilities can be extended"),
    ("mcp_types.methods.parse_server_request", "a server request's typed model"),
    ('"Validation error" message prefix', "how the SDK's HTTP transport reports a bad envelope"),
    # the tasks extension's face (mcp_extension): public names, structural assumptions
    ("Server.extensions", "what server/discover advertises under capabilities.extensions"),
    ("Connection.from_envelope", "a task's session on the extension's face, from the envelope"),
    ("NAME_BEARING_METHODS lacks tasks/*", "the Mcp-Name check of tasks/* requests is ours"),
    ("CORE_RESULT_TYPES lacks task", "a resultType task answer passes the runner unsieved"),
    # the lean path (mcp_lean): the Streamable HTTP endpoint and its session manager
    ("Server._session_manager", "the session manager streamable_http_app() made"),
    ("streamable_http_app route endpoint", "Route(path).app is the endpoint, maybe in .app"),
    ("StreamableHTTPSessionManager._server_instances", "session id -> its transport"),
    ("StreamableHTTPSessionManager._session_owners", "session id -> the credential"),
    ("StreamableHTTPSessionManager._lifespan_state", "what the server's lifespan yielded"),
    ("StreamableHTTPServerTransport idle accounting", "idle_scope, _idle_timeout, in-flight"),
    ("Connection.initialize_accepted", "a session past its handshake"),
    ("ServerRunner(server, connection, lifespan).on_request", "the SDK's request pipeline"),
    ("ServerRunner._compose_server_middleware", "a task's run leaves out the no-op span"),
    ("_streamable_http_modern._mcp_param_rejection", "the Mcp-Param header check"),
    ("StreamableHTTPServerTransport standalone stream", "_request_streams, GET key, event store"),
    # the front doors (task endpoint, SDK hooks, identity): transport modules they read
    ("mcp.shared.inbound envelope helpers", "classify, ladder rejection, routing headers, status"),
    ("streamable_http session header and Accept", "Mcp-Session-Id, check_accept_headers(request)"),
    ("TransportSecurityMiddleware(settings)", "validate_request(request, is_post=True) -> None"),
    ("header checks read request.headers.get", "a HeaderView answers them as a Request would"),
    ("streamable_http JSON parse and writers", "lone surrogates: pydantic_core, two writers"),
    ("auth_context.get_access_token", "the verified bearer token of the request being served"),
    ("InputRequiredResult.result_type default", "the resultType of an MRTR input round"),
    ("Server.add_notification_handler", "client notifications reach the face's handler"),
    ("mcp_types.version handshake versions", "HANDSHAKE_PROTOCOL_VERSIONS, the default version"),
)
