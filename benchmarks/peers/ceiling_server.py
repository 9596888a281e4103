"""The "ceiling": the thinnest 2025-11-25 tasks server Python runs, a raw ASGI app under uvicorn.

    .venv/bin/python benchmarks/peers/ceiling_server.py --port PORT

Benchmark only. No SDK and none of our validation, limits or stores: dicts for tasks,
an ``asyncio.Event`` per task for ``tasks/result``, JSON responses with a
``Content-Length``. What it keeps of the protocol is what every request of the
benchmark needs: ``initialize`` issues an ``Mcp-Session-Id`` and every other request
must carry a live one (400 without, 404 for an unknown one, as the SDK answers);
task-augmented ``tools/call`` of ``slow_compute`` (it completes after the requested
``seconds``); ``tasks/get``, ``tasks/result``, ``tasks/list`` (pages of 50) and
``tasks/cancel``; ``DELETE`` ends a session. Its CPU per operation is what HTTP parsing,
the event loop and JSON cost on this machine: no Python server on uvicorn answers these
requests for less.

uvicorn runs with its defaults (``loop="auto"``, ``http="auto"``: uvloop and httptools
when they import, else asyncio and h11); the line it writes to stderr at start says which.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import uvicorn

PROTOCOL_VERSION = "2025-11-25"
PAGE = 50
POLL_MS = 500
TOOL = json.loads((Path(__file__).parent / "slow_compute.json").read_bytes())
TERMINAL = frozenset({"completed", "failed", "cancelled"})
RELATED = "io.modelcontextprotocol/related-task"

SESSIONS: dict[str, list[str]] = {}  # session id -> its task ids, in creation order
TASKS: dict[str, dict[str, Any]] = {}  # task id -> wire Task
OWNER: dict[str, str] = {}  # task id -> session id
RESULTS: dict[str, dict[str, Any]] = {}
DONE: dict[str, asyncio.Event] = {}
RUNNING: dict[str, asyncio.Task[None]] = {}

Scope = dict[str, Any]
Headers = list[tuple[bytes, bytes]]
_dumps = json.JSONEncoder(separators=(",", ":")).encode


class Refused(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def now() -> str:
    return datetime.fromtimestamp(time.time(), UTC).isoformat().replace("+00:00", "Z")


def slow_compute_result(args: dict[str, Any]) -> dict[str, Any]:
    seconds, label = args.get("seconds", 1), args.get("label")
    text = f"done after {seconds:g}s ({label or 'no label'})"
    return {"content": [{"type": "text", "text": text}]}


async def run_task(tid: str, args: dict[str, Any]) -> None:
    seconds = float(args.get("seconds", 1))
    try:
        if seconds > 0:
            await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        return
    RESULTS[tid] = slow_compute_result(args)
    task = TASKS[tid]
    task["status"], task["lastUpdatedAt"] = "completed", now()
    DONE[tid].set()


def own(sid: str, params: dict[str, Any]) -> str:
    tid = params.get("taskId")
    if not isinstance(tid, str) or OWNER.get(tid) != sid:
        raise Refused(-32602, "Failed to retrieve task: Task not found")
    return tid


async def tools_call(sid: str, params: dict[str, Any]) -> dict[str, Any]:
    if params.get("name") != "slow_compute":
        raise Refused(-32602, f"Unknown tool: {params.get('name')}")
    args = params.get("arguments") or {}
    if "task" not in params:
        await run_task_inline(args)
        return slow_compute_result(args)
    tid, stamp = secrets.token_hex(16), now()
    task = {
        "taskId": tid,
        "status": "working",
        "createdAt": stamp,
        "lastUpdatedAt": stamp,
        "ttl": (params.get("task") or {}).get("ttl"),
        "pollInterval": POLL_MS,
    }
    TASKS[tid], OWNER[tid], DONE[tid] = task, sid, asyncio.Event()
    SESSIONS[sid].append(tid)
    job = asyncio.get_running_loop().create_task(run_task(tid, args))
    RUNNING[tid] = job
    job.add_done_callback(lambda _: RUNNING.pop(tid, None))
    return {"task": dict(task)}


async def run_task_inline(args: dict[str, Any]) -> None:
    seconds = float(args.get("seconds", 1))
    if seconds > 0:
        await asyncio.sleep(seconds)


async def tasks_result(sid: str, params: dict[str, Any]) -> dict[str, Any]:
    tid = own(sid, params)
    await DONE[tid].wait()
    if tid not in RESULTS:  # cancelled
        raise Refused(-32602, "Task was cancelled")
    return {**RESULTS[tid], "_meta": {RELATED: {"taskId": tid}}}


def tasks_list(sid: str, params: dict[str, Any]) -> dict[str, Any]:
    ids = SESSIONS[sid]
    start = int(params.get("cursor") or 0)
    out: dict[str, Any] = {"tasks": [TASKS[t] for t in ids[start : start + PAGE]]}
    if start + PAGE < len(ids):
        out["nextCursor"] = str(start + PAGE)
    return out


def tasks_cancel(sid: str, params: dict[str, Any]) -> dict[str, Any]:
    tid = own(sid, params)
    task = TASKS[tid]
    if task["status"] in TERMINAL:
        raise Refused(-32602, f"Cannot cancel task: already {task['status']}")
    job = RUNNING.get(tid)
    if job is not None:
        job.cancel()
    task["status"], task["lastUpdatedAt"] = "cancelled", now()
    DONE[tid].set()
    return dict(task)


async def dispatch(sid: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    if method == "tasks/get":
        return dict(TASKS[own(sid, params)])
    if method == "tools/call":
        return await tools_call(sid, params)
    if method == "tasks/result":
        return await tasks_result(sid, params)
    if method == "tasks/list":
        return tasks_list(sid, params)
    if method == "tasks/cancel":
        return tasks_cancel(sid, params)
    if method == "tools/list":
        return {"tools": [TOOL]}
    if method == "ping":
        return {}
    raise Refused(-32601, f"Method not found: {method}")


def initialize() -> tuple[str, dict[str, Any]]:
    sid = secrets.token_hex(16)
    SESSIONS[sid] = []
    caps: dict[str, Any] = {
        "tools": {},
        "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}},
    }
    result = {
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": caps,
        "serverInfo": {"name": "bench-ceiling", "version": "0"},
    }
    return sid, result


async def send_json(send: Any, status: int, payload: Any, extra: Headers | None = None) -> None:
    body = b"" if payload is None else _dumps(payload).encode()
    headers: Headers = [(b"content-length", b"%d" % len(body)), *(extra or [])]
    if body:
        headers.append((b"content-type", b"application/json"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def read_body(receive: Any) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


def http_error(rid: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}


async def app(scope: Scope, receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    sid = next((v.decode() for k, v in scope["headers"] if k == b"mcp-session-id"), None)
    if scope["method"] == "DELETE":
        found = sid is not None and SESSIONS.pop(sid, None) is not None
        await send_json(send, 200 if found else 404, None)
        return
    if scope["method"] != "POST" or scope["path"] != "/mcp":
        await send_json(send, 405, None)
        return
    msg = json.loads(await read_body(receive))
    rid, method = msg.get("id"), msg.get("method")
    if method == "initialize":
        sid, result = initialize()
        payload = {"jsonrpc": "2.0", "id": rid, "result": result}
        await send_json(send, 200, payload, [(b"mcp-session-id", sid.encode())])
        return
    if sid is None:
        await send_json(send, 400, http_error(None, -32600, "Bad Request: Missing session ID"))
        return
    if sid not in SESSIONS:
        await send_json(send, 404, http_error(None, -32600, "Session not found"))
        return
    if rid is None:  # a notification
        await send_json(send, 202, None)
        return
    try:
        result = await dispatch(sid, method, msg.get("params") or {})
    except Refused as exc:
        await send_json(send, 200, http_error(rid, exc.code, exc.message))
        return
    await send_json(send, 200, {"jsonrpc": "2.0", "id": rid, "result": result})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    config = uvicorn.Config(
        app, host=args.host, port=args.port, log_level="warning", lifespan="off"
    )
    config.load()
    server = uvicorn.Server(config)

    async def serve() -> None:  # what uvicorn.Server.run does, saying what it picked
        loop = type(asyncio.get_running_loop())
        print(
            f"ceiling: uvicorn {uvicorn.__version__} defaults: loop "
            f"{loop.__module__}.{loop.__qualname__}, http {config.http_protocol_class.__name__}",
            file=sys.stderr,
            flush=True,
        )
        await server.serve()

    with asyncio.Runner(loop_factory=config.get_loop_factory()) as runner:
        runner.run(serve())


if __name__ == "__main__":
    main()
