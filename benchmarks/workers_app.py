"""The app of ``bench_workers.py``: ``burn`` (50 ms of CPU, then returns), served by a front
end with its work in-process or on workers.

    python benchmarks/workers_app.py PORT STORE_URL TOKENS_FILE [--on-workers]   # front end
    python -m mcp_tasks.worker --store STORE_URL workers_app:build               # (cwd: benchmarks/)
"""

from __future__ import annotations

import json
import sys
import time

import anyio
from mcp.server.mcpserver import MCPServer

from mcp_tasks.runtime.engine.task_engine import EngineConfig
from mcp_tasks.runtime.serve.identity import bearer_tokens
from mcp_tasks.runtime.serve.server import McpTasks, tidy_http_errors
from mcp_tasks.store import TaskStore

BURN_S = 0.050


def build(
    store: TaskStore | None = None,
    tokens: dict[str, str] | None = None,
    on_workers: bool = True,
) -> McpTasks:
    mcp = MCPServer("bench-workers", **bearer_tokens(tokens or {}))
    config = EngineConfig(rate_limit_calls=1_000_000_000, max_active_per_requestor=100_000)
    tasks = McpTasks(mcp, store=store, config=config if store is not None else None)

    @tasks.tool(task_support="optional", on_workers=on_workers)
    @mcp.tool()
    async def burn(label: str = "") -> str:
        """Spend 50 ms of CPU (a busy loop), then answer."""
        end = time.process_time() + BURN_S
        n = 0
        while time.process_time() < end:
            n += 1
        return f"burnt {label}"

    return tasks


async def main(port: int, store_url: str, tokens_path: str, on_workers: bool) -> None:
    import uvicorn

    from mcp_tasks.runtime.stores.redis import RedisTaskStore

    with open(tokens_path, encoding="utf-8") as fh:
        tokens = json.load(fh)
    store = RedisTaskStore.from_url(store_url)
    tasks = build(store, tokens, on_workers)
    app = tidy_http_errors(tasks.streamable_http_app(stateless_http=True))
    try:
        async with tasks:
            config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
            await uvicorn.Server(config).serve()
    finally:
        await store.close()


if __name__ == "__main__":
    argv = sys.argv[1:]
    anyio.run(main, int(argv[0]), argv[1], argv[2], "--on-workers" in argv[3:])
