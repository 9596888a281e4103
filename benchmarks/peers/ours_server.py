"""Our server for the benchmark: the example server (``mcp_tasks.examples.server``) as shipped,
with two benchmark-only changes, both stated in the results:

- JSON responses on Streamable HTTP (``json_response=True``), like every server here;
- the per-requestor rate limit raised (the default, 1,000 ``tasks/*`` calls per 10 s,
  would cap polling at 100 gets/s per session).

``POST /bench/prefill?session=SID&n=N`` inserts N completed tasks for that session
straight into the store (used only for the 100,000-task list rows: filling them over
the wire would take minutes).

    .venv/bin/python benchmarks/peers/ours_server.py --port PORT [--store memory|sqlite:PATH]
"""

from __future__ import annotations

import argparse
import json
import logging
import secrets
import sys
import time
from typing import Any
from urllib.parse import parse_qs

import anyio
import uvicorn

from mcp_tasks.examples.server import build_server, make_store
from mcp_tasks.lifecycle import COMPLETED
from mcp_tasks.runtime.engine import EngineConfig
from mcp_tasks.store import TaskRecord

RESULT = {"content": [{"type": "text", "text": "done after 0s (no label)"}]}


def main() -> None:
    # As the example server's main() does: before MCPServer() configures the root logger at
    # INFO (which would write every audit event of the engine to stderr).
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--store", default="memory")
    args = parser.parse_args()
    anyio.run(serve, args)


async def serve(args: argparse.Namespace) -> None:
    store = make_store(args.store)
    config = EngineConfig(rate_limit_calls=1_000_000_000)
    mcp, tasks = build_server(store=store, config=config)
    inner = mcp.streamable_http_app(json_response=True)

    async def prefill(scope: dict[str, Any], receive: Any, send: Any) -> None:
        query = parse_qs(scope.get("query_string", b"").decode())
        sid, n = query["session"][0], int(query["n"][0])
        now = time.time()

        def record(i: int) -> TaskRecord:
            return TaskRecord(
                task_id=secrets.token_urlsafe(16),
                requestor=f"session:{sid}",
                method="tools/call",
                status=COMPLETED,
                created_at=now + i * 1e-6,
                last_updated_at=now,
                ttl_ms=3_600_000,
                poll_interval_ms=config.poll_interval_ms,
                result=dict(RESULT),
            )

        for start in range(0, n, 64):  # 64 at a time: a networked store overlaps round trips
            async with anyio.create_task_group() as tg:
                for i in range(start, min(n, start + 64)):
                    tg.start_soon(store.create, record(i))
        body = json.dumps({"inserted": n}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", b"%d" % len(body)),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/bench/prefill":
            await prefill(scope, receive, send)
        else:
            await inner(scope, receive, send)

    async with tasks:
        config_ = uvicorn.Config(
            app, host=args.host, port=args.port, log_level="warning", timeout_keep_alive=600
        )
        await uvicorn.Server(config_).serve()


if __name__ == "__main__":
    main()
