"""The shipped store-conformance suite (``mcp_tasks.testing``) on both plain stores."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from mcp_tasks.errors import InternalError
from mcp_tasks.protocol import COMPLETED, FAILED, INPUT_REQUIRED, REVISION
from mcp_tasks.runtime import InMemoryTaskStore, SqliteTaskStore
from mcp_tasks.store import TaskStore
from mcp_tasks.testing.store_conformance import StoreConformance, record


class TestInMemoryTaskStore(StoreConformance):
    async def make_store(self, tmp_path: Path) -> TaskStore:
        return InMemoryTaskStore()


class TestSqliteTaskStore(StoreConformance):
    async def make_store(self, tmp_path: Path) -> TaskStore:
        return SqliteTaskStore(tmp_path / "tasks.db")


@pytest.mark.anyio
async def test_sqlite_durable_and_recover(tmp_path: Path) -> None:
    """Results survive reopening; tasks left working/input_required become failed."""
    path = tmp_path / "tasks.db"
    s = SqliteTaskStore(path)
    await s.create(record("done"))
    await s.transition("done", COMPLETED, now=2e9, result={"content": [], "v": "é"})
    await s.create(record("running"))
    await s.create(record("asking"))
    await s.transition("asking", INPUT_REQUIRED, now=2e9)
    await s.close()
    s2 = SqliteTaskStore(path)
    try:
        recovered = await s2.recover(2e9 + 1, "server restarted")
        assert sorted(r.task_id for r in recovered) == ["asking", "running"]
        for tid in ("asking", "running"):
            r = await s2.get(tid)
            assert r is not None and r.status == FAILED and r.status_message == "server restarted"
            assert r.error == InternalError(message="server restarted").to_error()
        done = await s2.get("done")
        assert done is not None and done.result == {"content": [], "v": "é"}
        assert await s2.recover(2e9 + 2, "again") == []
    finally:
        await s2.close()


@pytest.mark.anyio
async def test_memory_store_recover_is_noop() -> None:
    assert await InMemoryTaskStore().recover(0.0, "x") == []


_OLD_SCHEMA = """
CREATE TABLE tasks (
    task_id TEXT PRIMARY KEY, requestor TEXT NOT NULL, method TEXT NOT NULL,
    status TEXT NOT NULL, created_at REAL NOT NULL, last_updated_at REAL NOT NULL,
    ttl_ms INTEGER, expires_at REAL, poll_interval_ms INTEGER, status_message TEXT,
    result TEXT, error TEXT, version INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
INSERT INTO tasks VALUES ('old', 'alice', 'tools/call', 'completed', 1.0, 2.0, NULL, NULL,
    500, NULL, '{"content":[]}', NULL, 1);
"""


@pytest.mark.anyio
async def test_sqlite_opens_a_file_made_before_faces(tmp_path: Path) -> None:
    """A database file written before tasks had a face still opens: its tasks belong to
    the first face (the generated revision), and new tasks keep theirs."""
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(_OLD_SCHEMA)
    s = SqliteTaskStore(path)
    try:
        old = await s.get("old")
        assert old is not None and old.face == REVISION and old.result == {"content": []}
        await s.create(record("new", face="another-face"))
        new = await s.get("new")
        assert new is not None and new.face == "another-face"
    finally:
        await s.close()
    s2 = SqliteTaskStore(path)  # migrating is done once; opening again changes nothing
    try:
        assert [r.face for r in await s2.list_tasks("alice", after=None, limit=5)] == [
            REVISION,
            "another-face",
        ]
    finally:
        await s2.close()


@pytest.mark.anyio
async def test_memory_expiry_heap_stays_bounded_by_the_tasks_kept_R_SEC_4() -> None:
    """Tasks deleted before their ttl (a requestor's oldest finished tasks, dropped for its
    cap) leave no heap entry behind for the rest of their ttl: however many come and go,
    the expiry heap holds at most about twice the tasks kept, and expiry still works."""
    store = InMemoryTaskStore()
    kept: list[str] = []
    for i in range(20_000):
        task_id = f"t{i}"
        await store.create(record(task_id, created_at=1_000.0 + i, ttl_ms=3_600_000))
        kept.append(task_id)
        if len(kept) > 100:
            assert await store.delete(kept.pop(0))
    assert len(store) == 100
    assert len(store._expiry) <= 2 * len(store) + 1024
    expired = await store.pop_expired(1_000.0 + 20_000 + 3_600, 1_000)
    assert sorted(r.task_id for r in expired) == sorted(kept)
    assert len(store) == 0
