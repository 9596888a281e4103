"""A stdio test server that sends task-augmented requests to its client.

Tool ``ask_client`` {kind: "sampling" | "elicitation"}: sends ``sampling/createMessage`` or
``elicitation/create`` through ``request_client_task`` (as a task when the client
declared it), and returns JSON: the final result and what the server saw.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer

from mcp_tasks.core.capabilities import peer_supports
from mcp_tasks.runtime.sdk import connection_of
from mcp_tasks.runtime.serve.server import McpTasks, request_client_task

mcp = MCPServer("client-task-test")
tasks = McpTasks(mcp)


@mcp.tool()
async def ask_client(ctx: Context, kind: str) -> str:
    session = ctx.request_context.session
    conn = connection_of(session)
    if kind == "sampling":
        method = "sampling/createMessage"
        params: dict[str, Any] = {
            "messages": [{"role": "user", "content": {"type": "text", "text": "say hi"}}],
            "maxTokens": 16,
        }
    else:
        method = "elicitation/create"
        params = {
            "message": "Your name?",
            "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
        }
    statuses: list[str] = []

    async def on_status(task: dict[str, Any]) -> None:
        statuses.append(task["status"])

    as_task = peer_supports(conn.client_capabilities, method)
    result = await request_client_task(session, method, params, ttl=30_000, on_status=on_status)
    listed = None
    if as_task:
        listed = await conn.send_raw_request("tasks/list", {})
    return json.dumps(
        {"as_task": as_task, "statuses": statuses, "result": result, "listed": listed}
    )


async def main() -> None:
    async with tasks:
        await mcp.run_stdio_async()


if __name__ == "__main__":
    anyio.run(main)
