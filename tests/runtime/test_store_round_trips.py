"""What a task's lifecycle and a poll of a finished task cost the durable stores, counted
(upper bounds, never times): the creation and the retention drop it makes share one round
trip (one Redis pipeline, one SQLite commit), the outcome is one more, and a task polled
after its end is read once per ``RECENT_S``, not once per ``tasks/get``."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_tasks.core.handlers import RequestContext
from mcp_tasks.runtime import EngineConfig, SqliteTaskStore, TaskEngine
from mcp_tasks.runtime.stores.redis import RedisTaskStore
from mcp_tasks.store import TaskStore
from testkit.core_calls import create_task, handle
from testkit.redis_fixtures import unique_namespace

pytestmark = pytest.mark.anyio

ALICE = RequestContext(requestor="alice")
#: finished tasks kept per requestor: past it, each creation drops the oldest (R-SEC-4)
KEPT = 5
TASKS = 20


async def instant(_tc: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": "done"}], "isError": False}


@asynccontextmanager
async def engine_on(store: TaskStore) -> AsyncIterator[TaskEngine]:
    # no sweep during the count (it is background work, counted apart)
    cfg = EngineConfig(
        max_tasks_per_requestor=KEPT, max_active_per_requestor=2, sweep_interval_s=3600
    )
    try:
        async with TaskEngine(store, cfg) as engine:
            yield engine
    finally:
        await store.close()


async def lifecycle(engine: TaskEngine) -> str:
    created = await create_task(engine, ALICE, "tools/call", instant, task={"ttl": 60_000})
    tid = str(created["task"]["taskId"])
    with anyio.fail_after(10):  # its work ends first, as over HTTP (else one read more)
        while not engine.runs.ended(tid):
            await anyio.sleep(0.001)
    got = await handle(engine, "tasks/result", {"taskId": tid}, ALICE)
    assert got["content"][0]["text"] == "done"
    return tid


async def test_redis_lifecycle_is_two_round_trips_with_its_drop(redis_url: str) -> None:
    store = RedisTaskStore(redis_url, namespace=unique_namespace())
    async with engine_on(store) as engine:
        for _ in range(KEPT + 1):  # past the cap: every creation from now on drops one
            await lifecycle(engine)
        run = store._run
        sent, commands = run.sent, run.commands
        for _ in range(TASKS):
            tid = await lifecycle(engine)
        # creation + drop, outcome; a heartbeat may fall in the count
        assert run.sent - sent <= 2 * TASKS + 1
        # pointer, task, index, expiry and lease; the drop's script, pointer and index
        # entries; the outcome's script and lease (a heartbeat is one more)
        assert run.commands - commands <= 11 * TASKS + 1
        engine.runs.forget(tid)  # as if it had ended over a second ago
        sent = run.sent
        for _ in range(50):
            await handle(engine, "tasks/get", {"taskId": tid}, ALICE)
        assert run.sent - sent <= 2  # one read (and a heartbeat), not one per poll


async def test_sqlite_lifecycle_is_two_commits_with_its_drop(tmp_path: Path) -> None:
    store = SqliteTaskStore(tmp_path / "tasks.db")
    statements: list[str] = []
    for conn in (store._conn, store._reader):
        assert isinstance(conn, sqlite3.Connection)
        conn.set_trace_callback(statements.append)
    async with engine_on(store) as engine:
        for _ in range(KEPT + 1):
            await lifecycle(engine)
        statements.clear()
        for _ in range(TASKS):
            tid = await lifecycle(engine)
        commits = sum(s.startswith("COMMIT") for s in statements)
        assert commits <= 2 * TASKS
        assert len(statements) <= 7 * TASKS  # BEGIN, INSERT, DELETE, COMMIT; BEGIN, UPDATE, COMMIT
        engine.runs.forget(tid)
        statements.clear()
        for _ in range(50):
            await handle(engine, "tasks/get", {"taskId": tid}, ALICE)
        assert len(statements) <= 1
