"""Memory an unauthenticated client can pin stays bounded (R-SEC-4).

F-6: every expired task leaves a tombstone (to answer "Task has expired"); the caps
were per requestor (1024) and per requestor count (10,000), so many sessions
expiring ttl-0 tasks could pin about 1.4 GiB. ``max_tombstones`` bounds the total.
F-7: the adapter remembered every requestor's connections in a map that was never
pruned, one entry per session ever seen.
"""

from __future__ import annotations

import gc
import secrets

import pytest
from mcp.server.mcpserver import MCPServer

from mcp_tasks.runtime import EngineConfig, TaskEngine
from mcp_tasks.runtime.serve.server import McpTasks


def test_tombstones_are_bounded_in_all_F6() -> None:
    cfg = EngineConfig(expired_tombstones_per_requestor=20, max_tombstones=50)
    stones = TaskEngine(config=cfg).tombstones
    ids: list[tuple[str, str]] = []
    for r in range(10):
        for _ in range(20):
            tid = secrets.token_urlsafe(16)
            stones.add(f"session:{r}", tid)
            ids.append((f"session:{r}", tid))
    total = sum(len(s) for s in stones._by_requestor.values())
    assert total == stones.count == 50
    # the most recently expired are remembered, the oldest forgotten
    assert all((r, t) in stones for r, t in ids[-50:])
    assert not any((r, t) in stones for r, t in ids[:-50])
    assert len(stones) == 3  # emptied requestors are dropped


def test_default_tombstone_cap_is_documented() -> None:
    assert EngineConfig().max_tombstones == 100_000


class _Conn:
    """Stands in for an SDK Connection of an HTTP session (only weak references are taken)."""

    session_id = "s"
    state: dict[str, object] = {}


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_requestor_connection_map_is_pruned_F7() -> None:
    tasks = McpTasks(MCPServer("bounds"))
    live = _Conn()
    tasks.sessions.bind("subject:alice", live)  # type: ignore[arg-type]
    for i in range(5000):
        conn = _Conn()
        tasks.sessions.bind(f"session:{i}", conn)  # type: ignore[arg-type]
        del conn
        gc.collect(0)
    assert len(tasks.sessions._connections) < 2100, len(tasks.sessions._connections)
    assert live in tasks.sessions._connections["subject:alice"]
