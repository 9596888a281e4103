"""The store-conformance suite: what every ``TaskStore`` must do.

Reuse it for a backend by subclassing ``StoreConformance`` in a test module and
giving it ``make_store``::

    class TestMyStore(StoreConformance):
        async def make_store(self, tmp_path):
            return MyStore(...)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_tasks.lifecycle import (
    CANCELLED,
    COMPLETED,
    FAILED,
    INPUT_REQUIRED,
    NON_TERMINAL,
    TERMINAL,
    WORKING,
)
from mcp_tasks.store import TaskRecord, TaskStore

T0 = 1_764_000_000.0


def record(
    task_id: str,
    requestor: str = "alice",
    *,
    created_at: float = T0,
    ttl_ms: int | None = 60_000,
    status: Any = WORKING,
) -> TaskRecord:
    return TaskRecord(
        task_id=task_id,
        requestor=requestor,
        method="tools/call",
        status=status,
        created_at=created_at,
        last_updated_at=created_at,
        ttl_ms=ttl_ms,
        poll_interval_ms=500,
    )


class StoreConformance:
    """Subclass and implement ``make_store``; every test runs against that store."""

    pytestmark = pytest.mark.anyio

    async def make_store(self, tmp_path: Path) -> TaskStore:
        raise NotImplementedError

    @pytest.fixture
    async def store(self, tmp_path: Path) -> Any:
        s = await self.make_store(tmp_path)
        try:
            yield s
        finally:
            await s.close()

    async def test_create_get_roundtrip(self, store: TaskStore) -> None:
        rec = record("t1")
        await store.create(rec)
        got = await store.get("t1")
        assert got is not None
        assert got.wire() == rec.wire()
        assert (got.requestor, got.method, got.ttl_ms) == ("alice", "tools/call", 60_000)
        assert await store.get("nope") is None

    async def test_duplicate_id_raises_key_error_R_ID_1(self, store: TaskStore) -> None:
        await store.create(record("t1"))
        with pytest.raises(KeyError):
            await store.create(record("t1", "bob"))
        got = await store.get("t1")
        assert got is not None and got.requestor == "alice"

    async def test_transition_allowed_moves_R_STATE_2(self, store: TaskStore) -> None:
        await store.create(record("t1"))
        r = await store.transition("t1", INPUT_REQUIRED, now=T0 + 1, status_message="need input")
        assert r is not None and r.status == INPUT_REQUIRED and r.version == 1
        assert r.status_message == "need input" and r.last_updated_at == T0 + 1
        r = await store.transition("t1", WORKING, now=T0 + 2)
        assert r is not None and r.status == WORKING and r.status_message is None
        assert r.version == 2
        # working -> working is not a move
        assert await store.transition("t1", WORKING, now=T0 + 3) is None

    @pytest.mark.parametrize("terminal", sorted(TERMINAL))
    async def test_terminal_is_final_R_STATE_3(self, store: TaskStore, terminal: Any) -> None:
        await store.create(record("t1"))
        assert await store.transition("t1", terminal, now=T0 + 1) is not None
        for dst in (WORKING, INPUT_REQUIRED, COMPLETED, FAILED, CANCELLED):
            assert await store.transition("t1", dst, now=T0 + 2) is None
            assert await store.transition("t1", dst, now=T0 + 2, expected=NON_TERMINAL) is None
        got = await store.get("t1")
        assert got is not None and got.status == terminal and got.version == 1

    async def test_result_and_error_stored_exactly_R_RESULT_1(self, store: TaskStore) -> None:
        result = {
            "content": [{"type": "text", "text": 'héllo \u2603 "quoted"'}],
            "structuredContent": {"n": 1.5, "big": 2**53, "nested": [None, True, {}]},
            "isError": False,
            "_meta": {"x": 1},
        }
        await store.create(record("ok"))
        await store.create(record("err"))
        await store.transition("ok", COMPLETED, now=T0 + 1, result=result)
        error = {"code": -32099, "message": "boom", "data": {"why": ["a", 1]}}
        await store.transition("err", FAILED, now=T0 + 1, error=error, status_message="boom")
        ok, err = await store.get("ok"), await store.get("err")
        assert ok is not None and ok.result == result and ok.error is None
        assert err is not None and err.error == error and err.result is None

    async def test_transition_keeps_result_when_none(self, store: TaskStore) -> None:
        await store.create(record("t1"))
        await store.transition("t1", CANCELLED, now=T0 + 1, error={"code": 1, "message": "x"})
        got = await store.get("t1")
        assert got is not None and got.error == {"code": 1, "message": "x"}

    async def test_same_status_message_update(self, store: TaskStore) -> None:
        await store.create(record("t1"))
        r = await store.transition(
            "t1", WORKING, now=T0 + 1, expected=(WORKING,), status_message="50%"
        )
        assert r is not None and r.status == WORKING and r.status_message == "50%"

    async def test_last_updated_never_goes_back_R_TTL_1(self, store: TaskStore) -> None:
        await store.create(record("t1"))
        r = await store.transition("t1", COMPLETED, now=T0 - 100)
        assert r is not None and r.last_updated_at >= r.created_at

    async def test_concurrent_transitions_one_winner_R_CANCEL_3(self, store: TaskStore) -> None:
        await store.create(record("t1"))
        wins: list[Any] = []

        async def go(status: Any) -> None:
            r = await store.transition("t1", status, now=T0 + 1, expected=NON_TERMINAL)
            if r is not None:
                wins.append(status)

        async with anyio.create_task_group() as tg:
            for s in (COMPLETED, CANCELLED, FAILED) * 5:
                tg.start_soon(go, s)
        assert len(wins) == 1
        got = await store.get("t1")
        assert got is not None and got.status == wins[0]

    async def test_unknown_transition_is_none(self, store: TaskStore) -> None:
        assert await store.transition("nope", COMPLETED, now=T0) is None

    async def test_list_keyset_order_and_isolation_R_LIST_1_R_SEC_1(self, store: TaskStore) -> None:
        # created out of order, some with equal timestamps: order is (created_at, task_id)
        specs = [("c", 3.0), ("a", 1.0), ("e", 2.0), ("b", 2.0), ("d", 5.0)]
        for tid, dt in specs:
            await store.create(record(tid, created_at=T0 + dt))
            await store.create(record("bob-" + tid, "bob", created_at=T0 + dt))
        want = ["a", "b", "e", "c", "d"]
        got = await store.list_tasks("alice", after=None, limit=100)
        assert [r.task_id for r in got] == want
        page1 = await store.list_tasks("alice", after=None, limit=2)
        assert [r.task_id for r in page1] == want[:2]
        last = page1[-1]
        page2 = await store.list_tasks("alice", after=(last.created_at, last.task_id), limit=2)
        assert [r.task_id for r in page2] == want[2:4]
        assert await store.list_tasks("carol", after=None, limit=10) == []
        assert all(
            r.requestor == "bob" for r in await store.list_tasks("bob", after=None, limit=10)
        )

    async def test_list_after_deleted_key_R_LIST_1(self, store: TaskStore) -> None:
        for i in range(6):
            await store.create(record(f"t{i}", created_at=T0 + i))
        page = await store.list_tasks("alice", after=None, limit=3)
        assert await store.delete("t2")
        rest = await store.list_tasks("alice", after=(page[-1].created_at, "t2"), limit=10)
        assert [r.task_id for r in rest] == ["t3", "t4", "t5"]
        assert [r.task_id for r in await store.list_tasks("alice", after=None, limit=10)] == [
            "t0",
            "t1",
            "t3",
            "t4",
            "t5",
        ]

    async def test_list_many_deletions(self, store: TaskStore) -> None:
        for i in range(200):
            await store.create(record(f"t{i:03d}", created_at=T0 + i))
        for i in range(0, 200, 3):
            await store.delete(f"t{i:03d}")
        got = [r.task_id for r in await store.list_tasks("alice", after=None, limit=500)]
        assert got == [f"t{i:03d}" for i in range(200) if i % 3]
        for i in range(200):
            await store.delete(f"t{i:03d}")
        assert await store.list_tasks("alice", after=None, limit=500) == []
        await store.create(record("again"))
        assert [r.task_id for r in await store.list_tasks("alice", after=None, limit=5)] == [
            "again"
        ]

    async def test_delete(self, store: TaskStore) -> None:
        await store.create(record("t1"))
        assert await store.delete("t1") is True
        assert await store.get("t1") is None
        assert await store.delete("t1") is False
        assert await store.count_active("alice") == 0

    async def test_pop_expired_only_expired_R_TTL_3(self, store: TaskStore) -> None:
        await store.create(record("short", ttl_ms=1_000))
        await store.create(record("long", ttl_ms=100_000))
        await store.create(record("forever", ttl_ms=None))
        await store.create(record("done", ttl_ms=2_000))
        await store.transition("done", COMPLETED, now=T0 + 1, result={"x": 1})
        assert await store.pop_expired(T0 + 0.5, 100) == []
        popped = await store.pop_expired(T0 + 2.0, 100)
        assert sorted(r.task_id for r in popped) == ["done", "short"]
        assert await store.get("short") is None and await store.get("done") is None
        assert await store.get("long") is not None and await store.get("forever") is not None
        assert await store.pop_expired(T0 + 2.0, 100) == []
        assert [r.task_id for r in await store.pop_expired(T0 + 10**9, 100)] == ["long"]

    async def test_pop_expired_limit_and_deleted(self, store: TaskStore) -> None:
        for i in range(10):
            await store.create(record(f"t{i}", ttl_ms=1_000 + i))
        await store.delete("t0")
        first = await store.pop_expired(T0 + 100, 4)
        second = await store.pop_expired(T0 + 100, 100)
        ids = [r.task_id for r in first + second]
        assert len(first) == 4 and sorted(ids) == [f"t{i}" for i in range(1, 10)]
        assert await store.list_tasks("alice", after=None, limit=100) == []

    async def test_count_active_R_SEC_4(self, store: TaskStore) -> None:
        for i in range(5):
            await store.create(record(f"t{i}"))
        await store.create(record("b", "bob"))
        assert await store.count_active("alice") == 5
        await store.transition("t0", COMPLETED, now=T0 + 1)
        await store.transition("t1", INPUT_REQUIRED, now=T0 + 1)
        await store.transition("t2", CANCELLED, now=T0 + 1)
        assert await store.count_active("alice") == 3
        await store.delete("t3")
        await store.delete("t0")
        assert await store.count_active("alice") == 2
        assert await store.count_active("bob") == 1
        assert await store.count_active("nobody") == 0
