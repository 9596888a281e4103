"""What the operators' views need from each store beyond the conformance suite: files and
databases written before a task kept its tool, the cross-requestor index of Redis, and a
cancel written into the store by another process (``mcptask admin cancel``), which stops
the work on the instance running it (R-CANCEL-2)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_tasks.errors import RequestCancelled
from mcp_tasks.protocol import CANCELLED, COMPLETED, FAILED, NON_TERMINAL, TOOLS_CALL
from mcp_tasks.runtime import EngineConfig, SqliteTaskStore, TaskContext, TaskEngine
from mcp_tasks.runtime.stores.redis import RedisTaskStore
from mcp_tasks.store import TaskQuery, TaskRecord, TaskStore
from mcp_tasks.testing.admin_conformance import tool_record, walk
from testkit.redis_fixtures import unique_namespace

pytestmark = pytest.mark.anyio

_BEFORE_TOOLS = """
CREATE TABLE tasks (
    task_id TEXT PRIMARY KEY, requestor TEXT NOT NULL, method TEXT NOT NULL,
    status TEXT NOT NULL, created_at REAL NOT NULL, last_updated_at REAL NOT NULL,
    ttl_ms INTEGER, expires_at REAL, poll_interval_ms INTEGER, status_message TEXT,
    result TEXT, error TEXT, version INTEGER NOT NULL DEFAULT 0, face TEXT NOT NULL
) WITHOUT ROWID;
INSERT INTO tasks VALUES ('old', 'alice', 'tools/call', 'completed', 1.0, 2.0, NULL, NULL,
    500, NULL, '{"content":[]}', NULL, 1, '2025-11-25');
"""


async def test_sqlite_opens_a_file_made_before_tools(tmp_path: Path) -> None:
    """An older file gets the ``tool`` column (its tasks have none) and lists across
    requestors; opening it again migrates nothing twice."""
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(_BEFORE_TOOLS)
    for _ in range(2):
        s = SqliteTaskStore(path)
        try:
            old = await s.get("old")
            assert old is not None and old.tool is None and old.result == {"content": []}
            if await s.get("new") is None:
                await s.create(tool_record("new", "bob", at=5.0))
            page = await s.list_all(TaskQuery(), before=None, limit=10)
            assert [(r.task_id, r.tool) for r in page.tasks] == [("new", "report"), ("old", None)]
        finally:
            await s.close()


async def test_redis_index_takes_in_tasks_stored_before_it(redis_url: str) -> None:
    """Tasks stored before ``NS:all`` existed (no member there, no ``tl`` field) are listed
    after one backfill of the namespace; entries whose key Redis expired are dropped."""
    ns = unique_namespace()
    store = RedisTaskStore(redis_url, namespace=ns)
    try:
        await store.create(tool_record("a1", "alice", at=1.0))
        await store.create(tool_record("b1", "bob", tool=None, at=2.0))
        await store.create(tool_record("gone", "bob", at=3.0))
        tag = store.tag("alice")
        await store.redis.hdel(store.keys.task(tag, "a1"), "tl")  # as stored before tools
        await store.redis.delete(store.keys.all)  # as stored before the index
        await store.redis.delete(store.keys.task(store.tag("bob"), "gone"))  # Redis expired it
        fresh = RedisTaskStore(redis_url, namespace=ns)  # another process: nothing cached
        try:
            page = await fresh.list_all(TaskQuery(), before=None, limit=10)
            assert [(r.task_id, r.requestor, r.tool) for r in page.tasks] == [
                ("b1", "bob", None),
                ("a1", "alice", None),
            ]
            assert await fresh.redis.zcard(fresh.keys.all) == 2  # the stale entry dropped
            assert await fresh.redis.get(fresh.keys.all_ready) == "1"
        finally:
            await fresh.close()
    finally:
        await store.close()


def _operator_cancel(store: TaskStore, task_id: str) -> Any:
    """What ``mcptask admin cancel`` writes, from a process without an engine."""
    error = RequestCancelled(detail="cancelled by an operator").to_error()
    return store.transition(
        task_id,
        CANCELLED,
        now=1e10,
        expected=NON_TERMINAL,
        status_message="Cancelled by an operator",
        error=error,
    )


async def _start_long_task(engine: TaskEngine, stopped: anyio.Event) -> TaskRecord:
    async def work(tc: TaskContext) -> dict[str, Any]:
        try:
            await anyio.sleep(3600)
        finally:
            stopped.set()
        return {"content": []}

    return await engine.start(
        "alice", engine_face(), TOOLS_CALL, work, tool_error=FAILED, tool="report"
    )


def engine_face() -> str:
    from mcp_tasks.runtime.faces.core import FACE

    return FACE


async def test_sqlite_cancel_from_another_process_stops_the_work_R_CANCEL_2(
    tmp_path: Path,
) -> None:
    """The serving engine's sweep reads back the tasks it runs: one cancelled in the file
    by another process has its work stopped and its listeners told, once; a terminal task
    is not cancelled twice."""
    path = tmp_path / "tasks.db"
    store = SqliteTaskStore(path)
    heard: list[tuple[str, str]] = []

    async def listener(rec: TaskRecord) -> None:
        heard.append((rec.task_id, rec.status.value))

    try:
        async with TaskEngine(store, EngineConfig(sweep_interval_s=0.05)) as engine:
            engine.on_status.append(listener)
            stopped = anyio.Event()
            rec = await _start_long_task(engine, stopped)
            other = SqliteTaskStore(path)  # the operator's CLI, another connection
            try:
                assert (await _operator_cancel(other, rec.task_id)) is not None
                assert (await _operator_cancel(other, rec.task_id)) is None  # terminal: once
            finally:
                await other.close()
            with anyio.fail_after(30):
                await stopped.wait()
                while (rec.task_id, CANCELLED.value) not in heard:
                    await anyio.sleep(0.02)
            assert engine.running == 0
            got = await store.get(rec.task_id)
            assert got is not None and got.status == CANCELLED
            assert got.status_message == "Cancelled by an operator"
            await anyio.sleep(0.2)  # more sweeps: nothing told twice
            assert heard.count((rec.task_id, CANCELLED.value)) == 1
    finally:
        await store.close()


async def test_redis_cancel_from_another_process_stops_the_work_R_CANCEL_2(
    redis_url: str,
) -> None:
    """On Redis the instance running the work learns of the change event at once."""
    ns = unique_namespace()
    store = RedisTaskStore(redis_url, namespace=ns)
    other = RedisTaskStore(redis_url, namespace=ns)  # not started: a CLI's store
    try:
        async with TaskEngine(store, EngineConfig(watch_fallback_s=0.2)) as engine:
            stopped = anyio.Event()
            rec = await _start_long_task(engine, stopped)
            await anyio.sleep(0.1)  # the monitor watches the task
            assert (await _operator_cancel(other, rec.task_id)) is not None
            with anyio.fail_after(30):
                await stopped.wait()
            got = await store.get(rec.task_id)
            assert got is not None and got.status == CANCELLED
            listed = await walk(other, TaskQuery(statuses=frozenset({CANCELLED})), 10)
            assert listed == [rec.task_id]
    finally:
        await other.close()
        await store.close()


async def test_engine_cancel_task_follows_the_cancel_rules_R_CANCEL_2(tmp_path: Path) -> None:
    """``TaskEngine.cancel_task`` (an operator's, any requestor's task): moves a running
    task once and stops its work; a terminal or unknown task is left as it is."""
    async with TaskEngine() as engine:
        stopped = anyio.Event()
        rec = await _start_long_task(engine, stopped)
        new, moved = await engine.cancel_task(rec.task_id, "Cancelled by an operator")
        assert moved and new is not None and new.status == CANCELLED
        with anyio.fail_after(30):
            await stopped.wait()
        again, moved = await engine.cancel_task(rec.task_id, "again")
        assert not moved and again is not None and again.status_message == new.status_message
        assert await engine.cancel_task("nope", "x") == (None, False)

        async def quick(tc: TaskContext) -> dict[str, Any]:
            return {"content": []}

        done = await engine.start("bob", engine_face(), TOOLS_CALL, quick, tool_error=FAILED)
        with anyio.fail_after(30):
            while (got := await engine.store.get(done.task_id)) and got.status != COMPLETED:
                await anyio.sleep(0.01)
        assert (await engine.cancel_task(done.task_id, "late"))[1] is False


class _SlowCreate(SqliteTaskStore):
    """A creation whose write waits (a lock held elsewhere, a loaded machine) until told."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.writing = anyio.Event()
        self.release = anyio.Event()

    async def create_limited(self, record: TaskRecord, max_active: int) -> bool:
        self.writing.set()
        await self.release.wait()
        return await super().create_limited(record, max_active)


async def test_a_sweep_during_a_creation_leaves_its_work_running_R_CANCEL_2(
    tmp_path: Path,
) -> None:
    """The run is registered before its creation is written; the sweep that reads back the
    tasks running here (for operators' cancels) finds no record for it then. That is not a
    task ended elsewhere: its work must start and its outcome be stored (it was stopped
    before it began, and the task stayed working forever)."""
    store = _SlowCreate(tmp_path / "tasks.db")

    async def work(tc: TaskContext) -> dict[str, Any]:
        await anyio.sleep(0.05)  # a work that awaits (a stopped one ends here)
        return {"content": [{"type": "text", "text": "done"}]}

    try:
        async with TaskEngine(store, EngineConfig(sweep_interval_s=3600)) as engine:
            created: list[TaskRecord] = []

            async def create() -> None:
                created.append(
                    await engine.start(
                        "alice", engine_face(), TOOLS_CALL, work, tool_error=FAILED, tool="t"
                    )
                )

            async with anyio.create_task_group() as tg:
                tg.start_soon(create)
                with anyio.fail_after(10):
                    await store.writing.wait()
                await engine.sweep()  # the run is known, its record not yet written
                store.release.set()
            task_id = created[0].task_id
            with anyio.fail_after(30):
                while (got := await store.get(task_id)) is None or got.status != COMPLETED:
                    await anyio.sleep(0.02)
    finally:
        await store.close()
