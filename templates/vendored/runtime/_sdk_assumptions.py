"""What :mod:`._sdk` assumes about the ``mcp`` SDK beyond its documented API, one line
each, and the releases they were checked against: ``tests/mcp/test_sdk_canary.py`` has a
test named after each entry. Data only (no SDK import): ``_sdk`` re-exports both names.

What is public in every supported release (its name without an underscore, in a module's
``__all__`` or documented there) is not listed: ``Connection.exit_stack``,
``Connection.from_envelope``, ``Server.session_manager``, ``ServerRunner(...).on_request``,
``mcp.shared.inbound``, ``mcp_types.methods``."""

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
    ("ClientSession._stamp", "protocol-version stamping of a raw request"),
    ("ClientSession._dispatcher", "raw requests that skip the SDK's result validation"),
    ("ClientSession._on_request", "overridden: the stock one answers tasks/* with -32601"),
    ("ClientSession._build_capabilities", "overridden: extended with capabilities.tasks"),
    ("modern stamp _meta envelope", "a raw request's clientCapabilities can be extended"),
    ('"Validation error" message prefix', "how the SDK's HTTP transport reports a bad envelope"),
    # the tasks extension's face (mcp_extension): public names, structural assumptions
    ("NAME_BEARING_METHODS lacks tasks/*", "the Mcp-Name check of tasks/* requests is ours"),
    ("CORE_RESULT_TYPES lacks task", "a resultType task answer passes the runner unsieved"),
    # the lean path (mcp_lean): the Streamable HTTP endpoint and its session manager
    ("streamable_http_app route endpoint", "Route(path).app is the endpoint, maybe in .app"),
    ("StreamableHTTPSessionManager._server_instances", "session id -> its transport"),
    ("StreamableHTTPSessionManager._session_owners", "session id -> the credential"),
    ("StreamableHTTPSessionManager._lifespan_state", "what the server's lifespan yielded"),
    ("StreamableHTTPServerTransport idle accounting", "idle_scope, _idle_timeout, in-flight"),
    ("ServerRunner._compose_server_middleware", "a task's run leaves out the no-op span"),
    ("_streamable_http_modern._mcp_param_rejection", "the Mcp-Param header check"),
    ("StreamableHTTPServerTransport standalone stream", "_request_streams, GET key, event store"),
    # the front doors (task endpoint, SDK hooks): the transport's checks, its JSON
    ("header checks read request.headers.get", "a HeaderView answers them as a Request would"),
    ("streamable_http JSON parse and writers", "lone surrogates: pydantic_core, two writers"),
)
