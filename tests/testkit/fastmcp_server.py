"""A FastMCP 4 tasks server (``fastmcp-tasks``, the 2026-07-28 tasks extension) with the
example server's tool contract, as far as FastMCP can serve it. Runs in the peer's own
virtualenv (``testkit.fastmcp_peer``):

    tests/interop/.venv-fastmcp/bin/python tests/testkit/fastmcp_server.py PORT [--docket URL] [--json]

Streamable HTTP at ``http://127.0.0.1:PORT/mcp``. Tasks live in a Docket backend
(``memory://`` by default: one process; ``redis://...`` for several).

Tools (texts as in ``mcp_tasks.examples.server``):

- ``greet`` {name}: never a task; ``Hello, {name}!``.
- ``slow_compute`` {seconds=1, label?}: optional; ``done after {seconds}s ({label})``.
- ``failing_job`` {}: required; an ``isError`` result ``job failed`` (task ``completed``).
- ``protocol_error_job`` {}: required; a JSON-RPC error (task ``failed``).
- ``confirm_delete`` {path} or {filename}: optional; one elicitation ``confirm``.
- ``multi_input`` {}: optional; two elicitations (``first``, ``second``) at once.
- ``test_tool_with_task`` {}: required; asks ``user_name``, then ``Hello, {name}!``.

Where FastMCP departs (measured, see the tasks-extension notes): input inside a task is
FastMCP's "guard pattern" (the tool returns an ``InputRequiredResult`` and re-runs with
``ctx.input_responses`` after ``tasks/update``; imperative ``ctx.elicit`` is refused inside
a task), so a required tool asks inside its task, never in an input round before it; its
client sends no ``Mcp-Name`` on ``tasks/*``; there is no ``notifications/tasks``.
"""

from __future__ import annotations

import argparse
from typing import Any

import anyio
import mcp_types as types
from fastmcp import Context, FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.utilities.tasks import TaskConfig
from fastmcp_tasks import TasksExtension
from mcp.shared.exceptions import MCPError

REQUIRED = TaskConfig(mode="required")


def ask(message: str, **properties: str) -> types.ElicitRequest:
    """A form elicitation asking for the given ``{property: json type}``."""
    schema = {k: {"type": v} for k, v in properties.items()}
    return types.ElicitRequest(
        params=types.ElicitRequestFormParams(
            message=message,
            requested_schema={"type": "object", "properties": schema, "required": list(schema)},
        )
    )


def accepted(answer: Any) -> dict[str, Any] | None:
    """The content of an accepted elicitation answer, else None."""
    if getattr(answer, "action", None) != "accept":
        return None
    return dict(getattr(answer, "content", None) or {})


def build(docket_url: str | None = None) -> FastMCP:
    mcp = FastMCP("fastmcp-tasks-peer")
    mcp.add_extension(TasksExtension(url=docket_url))  # None: memory://

    @mcp.tool()
    async def greet(name: str) -> str:
        """Say hello (never a task)."""
        return f"Hello, {name}!"

    @mcp.tool(task=True)
    async def slow_compute(seconds: float = 1, label: str | None = None) -> str:
        """Wait `seconds`; a task when the request declared the tasks extension."""
        await anyio.sleep(seconds)
        return f"done after {seconds:g}s ({label or 'no label'})"

    @mcp.tool(task=REQUIRED)
    async def failing_job() -> str:
        """Always ends with an isError result."""
        raise ToolError("job failed")

    @mcp.tool(task=REQUIRED)
    async def protocol_error_job() -> str:
        """Always raises: the task fails with a JSON-RPC error."""
        raise MCPError(types.INTERNAL_ERROR, "Internal error: protocol_error_job crashed")

    @mcp.tool(task=True)
    async def confirm_delete(
        ctx: Context, path: str | None = None, filename: str | None = None
    ) -> types.InputRequiredResult | str:
        """Ask the user before deleting `path` (or `filename`; nothing is really deleted)."""
        target = path if path is not None else filename
        got = ctx.input_responses or {}
        if "confirm" not in got:  # the guard pattern: re-run after tasks/update
            request = ask(f"Delete {target}?", confirm="boolean")
            return types.InputRequiredResult(input_requests={"confirm": request})
        return f"deleted {target}" if accepted(got["confirm"]) is not None else f"kept {target}"

    @mcp.tool(task=True)
    async def multi_input(ctx: Context) -> types.InputRequiredResult | str:
        """Ask two questions at once (two input requests outstanding together)."""
        got = ctx.input_responses or {}
        keys = ("first", "second")
        missing = {k: ask(f"{k}: name?", name="string", confirm="boolean") for k in keys}
        missing = {k: v for k, v in missing.items() if k not in got}
        if missing:
            return types.InputRequiredResult(input_requests=missing)
        parts = []
        for k in keys:
            content = accepted(got[k])
            parts.append("declined" if content is None else f"{content.get('name', '')} accept")
        return "answers: " + ", ".join(parts)

    @mcp.tool(task=REQUIRED)
    async def test_tool_with_task(ctx: Context) -> types.InputRequiredResult | str:
        """Ask the user's name, then greet them (always a task)."""
        got = ctx.input_responses or {}
        if "user_name" not in got:
            request = ask("Your name?", name="string")
            return types.InputRequiredResult(input_requests={"user_name": request})
        content = accepted(got["user_name"])
        return f"Hello, {'stranger' if content is None else content.get('name')}!"

    return mcp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("port", type=int)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--docket", help="Docket URL (default memory://)")
    parser.add_argument("--json", action="store_true", help="JSON responses, not SSE")
    args = parser.parse_args()
    build(args.docket).run(
        transport="http",
        host=args.host,
        port=args.port,
        show_banner=False,
        log_level="warning",
        json_response=args.json or None,
    )


if __name__ == "__main__":
    main()
