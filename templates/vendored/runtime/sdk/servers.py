"""The SDK's server objects: the low-level ``Server`` inside whatever a user serves with
(a ``Server``, an ``MCPServer``), and an ``MCPServer``'s tool-argument errors made short."""

from __future__ import annotations

from typing import Any

from mcp.server.lowlevel.server import Server
from pydantic import ValidationError

from ...errors import describe_validation_error as _describe

__all__ = ["lowlevel_server", "server_of", "tidy_argument_errors"]


def server_of(obj: Any) -> Server[Any] | None:
    """The low-level ``Server`` of ``obj`` when it is a ``Server`` or an ``MCPServer``
    (private attribute), else None."""
    if isinstance(obj, Server):
        return obj
    inner = getattr(obj, "_lowlevel_server", None)
    return inner if isinstance(inner, Server) else None


def lowlevel_server(server: Any) -> Server[Any]:
    """The low-level ``Server`` of a ``Server`` or an ``MCPServer``."""
    found = server_of(server)
    if found is None:
        raise TypeError(f"expected mcp Server or MCPServer, got {type(server).__name__}")
    return found


def tidy_argument_errors(server: Any) -> None:
    """An ``MCPServer``'s tool called with arguments that do not validate answers with their
    names and reasons (``Error executing tool t: arguments.seconds: Input should be a valid
    number``), not pydantic's report of them (the values sent, error types, a documentation
    URL), which the SDK puts in the tool's ``isError`` result: the server's ``call_tool``,
    which its ``tools/call`` handler calls, is wrapped on the instance. Idempotent; anything
    but an ``MCPServer`` (a low-level ``Server``: its handler is its own) is left as it is."""
    from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError

    call_tool = getattr(server, "call_tool", None)
    if isinstance(server, Server) or call_tool is None or getattr(call_tool, _TIDY, False):
        return

    async def tidy_call_tool(name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(exc, UnexpectedToolError) or not isinstance(cause, ValidationError):
                raise
            detail = _describe(cause, "arguments")
            raise ToolError(f"Error executing tool {name}: {detail}") from cause

    setattr(tidy_call_tool, _TIDY, True)
    server.call_tool = tidy_call_tool


_TIDY = "__mcp_tasks_tidy_arguments__"
