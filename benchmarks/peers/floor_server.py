"""The "floor": ``slow_compute`` as a task on ``mcp`` 2.3 with the thinnest hand-written tasks.

    .venv/bin/python benchmarks/peers/floor_server.py --port PORT

What a task server on the SDK cannot avoid: the SDK's Streamable HTTP transport,
session manager, JSON-RPC dispatcher and middleware chain. Everything else is as
thin as it gets: dicts for tasks, an ``asyncio.Event`` per task for ``tasks/result``,
the tool's coroutine started directly, no ttl, no limits, no validation beyond the
SDK's own. Its CPU per operation is what the transport alone costs; our server
cannot go below it while it runs on this transport.

``--sdk-tool`` ("floor + SDK tool path"): the background work runs the tool through the
SDK's own ``tools/call`` pipeline (``call_next``: params validation, the handler, the
result sieve), as our adapter does, to split our overhead from that pipeline's.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import secrets
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import mcp_types as types
import uvicorn
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ConfigDict

PAGE = 50
TASKS: dict[str, dict[str, Any]] = {}  # task id -> wire Task
OWNER: dict[str, str] = {}  # task id -> session id
RESULTS: dict[str, dict[str, Any]] = {}
DONE: dict[str, asyncio.Event] = {}
BY_SESSION: dict[str, list[str]] = {}
RUNNING: set[asyncio.Task[None]] = set()
VIA_SDK = False  # --sdk-tool: run the tool through the SDK's own tools/call path
# The example contract's slow_compute, as the mcp 1.29 peer lists it too (one definition).
TOOL = types.Tool.model_validate_json((Path(__file__).parent / "slow_compute.json").read_bytes())


class AnyParams(BaseModel):
    model_config = ConfigDict(extra="allow")


def now() -> str:
    return datetime.fromtimestamp(time.time(), UTC).isoformat().replace("+00:00", "Z")


async def slow_compute(seconds: float = 1, label: str | None = None) -> dict[str, Any]:
    if seconds > 0:
        await asyncio.sleep(seconds)
    return {
        "content": [{"type": "text", "text": f"done after {seconds:g}s ({label or 'no label'})"}]
    }


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[TOOL])


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> dict[str, Any]:
    return await slow_compute(**(params.arguments or {}))


def session_of(ctx: Any) -> str:
    return ctx.request.headers.get("mcp-session-id", "") if ctx.request is not None else ""


def own(ctx: Any, params: Any) -> str:
    tid = (params.model_extra or {}).get("taskId")
    if tid not in TASKS or OWNER[tid] != session_of(ctx):
        raise MCPError(types.INVALID_PARAMS, "Failed to retrieve task: Task not found")
    return tid


async def middleware(ctx: Any, call_next: Any) -> Any:
    if ctx.method == "tools/call" and isinstance(ctx.params, dict) and "task" in ctx.params:
        tid = secrets.token_hex(16)
        stamp = now()
        task = {
            "taskId": tid,
            "status": "working",
            "createdAt": stamp,
            "lastUpdatedAt": stamp,
            "ttl": (ctx.params.get("task") or {}).get("ttl"),
            "pollInterval": 500,
        }
        sid = session_of(ctx)
        TASKS[tid], OWNER[tid], DONE[tid] = task, sid, asyncio.Event()
        BY_SESSION.setdefault(sid, []).append(tid)
        args = ctx.params.get("arguments") or {}
        plain = {k: v for k, v in ctx.params.items() if k != "task"}

        async def run() -> None:
            if VIA_SDK:
                res = await call_next(dataclasses.replace(ctx, params=plain))
                if not isinstance(res, dict):
                    res = res.model_dump(by_alias=True, mode="json", exclude_none=True)
                RESULTS[tid] = res
            else:
                RESULTS[tid] = await slow_compute(**args)
            task["status"], task["lastUpdatedAt"] = "completed", now()
            DONE[tid].set()

        job = asyncio.get_running_loop().create_task(run())
        RUNNING.add(job)
        job.add_done_callback(RUNNING.discard)
        return {"task": dict(task)}
    result = await call_next(ctx)
    if ctx.method == "initialize" and isinstance(result, dict):
        result.setdefault("capabilities", {})["tasks"] = {
            "list": {},
            "cancel": {},
            "requests": {"tools": {"call": {}}},
        }
    return result


async def tasks_get(ctx: Any, params: AnyParams) -> dict[str, Any]:
    return dict(TASKS[own(ctx, params)])


async def tasks_result(ctx: Any, params: AnyParams) -> dict[str, Any]:
    tid = own(ctx, params)
    await DONE[tid].wait()
    out = dict(RESULTS[tid])
    out["_meta"] = {"io.modelcontextprotocol/related-task": {"taskId": tid}}
    return out


async def tasks_list(ctx: Any, params: AnyParams) -> dict[str, Any]:
    ids = BY_SESSION.get(session_of(ctx), [])
    start = int((params.model_extra or {}).get("cursor") or 0)
    out: dict[str, Any] = {"tasks": [TASKS[t] for t in ids[start : start + PAGE]]}
    if start + PAGE < len(ids):
        out["nextCursor"] = str(start + PAGE)
    return out


async def tasks_cancel(ctx: Any, params: AnyParams) -> dict[str, Any]:
    raise MCPError(types.INVALID_PARAMS, "Cannot cancel task: already terminal")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument(
        "--sdk-tool", action="store_true", help="run the tool through the SDK's tools/call path"
    )
    args = parser.parse_args()
    global VIA_SDK
    VIA_SDK = args.sdk_tool
    server = Server("bench-floor", on_list_tools=list_tools, on_call_tool=call_tool)
    server.middleware.append(middleware)
    for method, handler in (
        ("tasks/get", tasks_get),
        ("tasks/result", tasks_result),
        ("tasks/list", tasks_list),
        ("tasks/cancel", tasks_cancel),
    ):
        server.add_request_handler(method, AnyParams, handler)
    app = server.streamable_http_app(json_response=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", timeout_keep_alive=600)


if __name__ == "__main__":
    main()
