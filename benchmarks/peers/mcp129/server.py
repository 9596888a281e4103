"""Benchmark peer: the example contract's ``slow_compute`` on ``mcp==1.29.0`` experimental tasks.

Runs in its own virtualenv (``benchmarks/.venv-mcp129``, made by ``peers_bench.py``):

    benchmarks/.venv-mcp129/bin/python benchmarks/peers/mcp129/server.py --port PORT

Low-level ``Server`` + ``server.experimental.enable_tasks()`` (its ``InMemoryTaskStore``,
default ``tasks/*`` handlers) and ``ctx.experimental.run_task``; stateful Streamable
HTTP with JSON responses, like every server in the benchmark.
"""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path

import anyio
import mcp.types as types
import uvicorn
from mcp.server.experimental.task_context import ServerTaskContext
from mcp.server.fastmcp.server import StreamableHTTPASGIApp
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.applications import Starlette
from starlette.routing import Route

server = Server("bench-mcp129-peer")
server.experimental.enable_tasks()

# The example contract's slow_compute, as the floor server lists it too (one definition).
SLOW_COMPUTE = types.Tool.model_validate_json(
    (Path(__file__).resolve().parents[1] / "slow_compute.json").read_bytes()
)


@server.list_tools()
async def list_tools() -> list[types.Tool]:
    return [SLOW_COMPUTE]


@server.call_tool()
async def call_tool(name: str, arguments: dict) -> types.CallToolResult | types.CreateTaskResult:
    if name != "slow_compute":
        raise ValueError(f"unknown tool {name}")
    seconds = float(arguments.get("seconds", 1))
    label = arguments.get("label")
    text = f"done after {seconds:g}s ({label or 'no label'})"

    async def work(task: ServerTaskContext) -> types.CallToolResult:
        if seconds > 0:
            await anyio.sleep(seconds)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    ctx = server.request_context
    if ctx.experimental.is_task:
        return await ctx.experimental.run_task(work)
    if seconds > 0:
        await anyio.sleep(seconds)
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    manager = StreamableHTTPSessionManager(app=server, json_response=True)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette):
        async with manager.run():
            yield

    app = Starlette(
        routes=[Route("/mcp", endpoint=StreamableHTTPASGIApp(manager))], lifespan=lifespan
    )
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", timeout_keep_alive=600)


if __name__ == "__main__":
    main()
