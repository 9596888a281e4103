"""The shipped store-conformance suite (``mcp_tasks.testing``) on both plain stores."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_tasks.errors import InternalError
from mcp_tasks.protocol import COMPLETED, FAILED, INPUT_REQUIRED
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
