"""The store-conformance suite: what every ``TaskStore`` must do, checked against this
package's own generated types (statuses, lifecycle, errors).

Run it on your store by subclassing in one of your test modules::

    from mcp_tasks.testing.store_conformance import StoreConformance

    class TestMyStore(StoreConformance):
        async def make_store(self, tmp_path):
            return MyStore(tmp_path / "tasks.db")

A ``SharedTaskStore`` (several processes share it) subclasses ``SharedStoreConformance``
and also gives ``make_peer``: another instance on the same backend, as a second process
would open it; give both a short lease (well under a second) so the lease test is quick.
Each test gets a fresh store and closes it (and its peers) afterwards."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

from ..errors import InternalError
from ..protocol import (
    CANCELLED,
    COMPLETED,
    FAILED,
    INITIAL,
    INPUT_REQUIRED,
    NON_TERMINAL,
    REVISION,
    STATUSES,
    TERMINAL,
    TOOLS_CALL,
    WORKING,
    TaskStatus,
)
from ..store import SharedTaskStore, TaskRecord, TaskStore, UnstorableValue
from .admin_conformance import AdminConformance
from .limit_conformance import LimitConformance
from .pytest_api import ANYIO, fixture, parametrize, raises

T0 = 1_764_000_000.0
#: a lone surrogate: JSON carries it, UTF-8 cannot
LONE = "\ud800"

__all__ = ["T0", "SharedStoreConformance", "StoreConformance", "record"]


def record(
    task_id: str,
    requestor: str = "alice",
    *,
    created_at: float = T0,
    ttl_ms: int | None = 60_000,
    status: TaskStatus = INITIAL,
    face: str = REVISION,
) -> TaskRecord:
    """A new task record as the engine would create it (through ``face``)."""
    return TaskRecord(
        task_id, requestor, TOOLS_CALL, status, created_at, created_at, ttl_ms, 500, face=face
    )


@asynccontextmanager
async def running(*stores: TaskStore) -> AsyncIterator[None]:
    """The stores' background work (change listener, heartbeat) runs inside; it stops on
    leaving, as if the process had stopped."""
    async with anyio.create_task_group() as tg:
        for store in stores:
            await store.start(tg)
        yield
        tg.cancel_scope.cancel()


class StoreConformance(AdminConformance, LimitConformance):
    """Subclass and implement ``make_store``; every test runs against that store (with the
    operators' tests of ``admin_conformance``: ``tool`` kept, ``list_all``)."""

    pytestmark = ANYIO

    async def make_store(self, tmp_path: Path) -> TaskStore:
        raise NotImplementedError

    @fixture
    async def store(self, tmp_path: Path) -> AsyncIterator[TaskStore]:
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
        assert got == rec
        assert (got.requestor, got.method, got.ttl_ms) == ("alice", TOOLS_CALL, 60_000)
        assert await store.get("nope") is None

    async def test_get_own_finds_the_requestors_task_R_SEC_1(self, store: TaskStore) -> None:
        """``get_own``: a requestor's own task as ``get``; another's None or the record."""
        await store.create(rec := record("t1"))
        assert await store.get_own("t1", "alice") == rec
        assert await store.get_own("nope", "alice") is None
        assert await store.get_own("t1", "bob") in (None, rec)
        await store.transition("t1", COMPLETED, now=T0 + 1, result={"ok": True})
        got = await store.get_own("t1", "alice")
        assert got is not None and got.status == COMPLETED and got.result == {"ok": True}
        await store.delete("t1")
        assert await store.get_own("t1", "alice") is None

    async def test_face_is_kept(self, store: TaskStore) -> None:
        """A task remembers the face that created it (a face serves only its own tasks)."""
        await store.create(record("t1"))
        await store.create(record("t2", face="another-face"))
        await store.transition("t2", WORKING, now=T0 + 1, status_message="on it")
        one, two = await store.get("t1"), await store.get("t2")
        assert one is not None and one.face == REVISION
        assert two is not None and two.face == "another-face"
        listed = await store.list_tasks("alice", after=None, limit=10)
        assert [r.face for r in listed] == [REVISION, "another-face"]

    async def test_list_filters_by_face_R_LIST_1(self, store: TaskStore) -> None:
        """``list_tasks(face=F)`` pages F's tasks only, in ``(created_at, task_id)`` order:
        full pages across runs of the other face's tasks, keyset cursors past them too;
        ``face=None`` (the default) lists every face."""
        other = "another-face"
        faces = [REVISION, other, other, other, REVISION, other, REVISION, REVISION, other]
        for i, face in enumerate(faces):
            await store.create(record(f"t{i}", created_at=T0 + i, face=face))
        await store.create(record("bob-1", "bob", created_at=T0 + 1))
        mine = [f"t{i}" for i, face in enumerate(faces) if face == REVISION]
        theirs = [f"t{i}" for i, face in enumerate(faces) if face == other]
        page1 = await store.list_tasks("alice", after=None, limit=2, face=REVISION)
        assert [r.task_id for r in page1] == mine[:2]
        last = page1[-1]
        after = (last.created_at, last.task_id)
        page2 = await store.list_tasks("alice", after=after, limit=2, face=REVISION)
        assert [r.task_id for r in page2] == mine[2:]
        assert await store.list_tasks("alice", after=(T0 + 7, "t7"), limit=2, face=REVISION) == []
        listed = await store.list_tasks("alice", after=None, limit=10, face=other)
        assert [r.task_id for r in listed] == theirs
        assert all(r.face == other for r in listed)
        every = await store.list_tasks("alice", after=None, limit=20)
        assert [r.task_id for r in every] == [f"t{i}" for i in range(len(faces))]
        assert await store.list_tasks("alice", after=None, limit=10, face="no-such-face") == []
        bobs = await store.list_tasks("bob", after=None, limit=10, face=REVISION)
        assert [r.task_id for r in bobs] == ["bob-1"]

    async def test_duplicate_id_raises_key_error_R_ID_1(self, store: TaskStore) -> None:
        await store.create(record("t1"))
        with raises(KeyError):
            await store.create(record("t1", "bob"))
        got = await store.get("t1")
        assert got is not None and got.requestor == "alice"

    async def test_transition_allowed_moves_R_STATE_2(self, store: TaskStore) -> None:
        await store.create(record("t1", status=WORKING))
        r = await store.transition("t1", INPUT_REQUIRED, now=T0 + 1, status_message="need input")
        assert r is not None and r.status == INPUT_REQUIRED and r.version == 1
        assert r.status_message == "need input" and r.last_updated_at == T0 + 1
        r = await store.transition("t1", WORKING, now=T0 + 2)
        assert r is not None and r.status == WORKING and r.status_message is None
        assert r.version == 2
        # working -> working is not a move
        assert await store.transition("t1", WORKING, now=T0 + 3) is None

    @parametrize("terminal", sorted(TERMINAL))
    async def test_terminal_is_final_R_STATE_3(
        self, store: TaskStore, terminal: TaskStatus
    ) -> None:
        await store.create(record("t1"))
        assert await store.transition("t1", terminal, now=T0 + 1) is not None
        for dst in STATUSES:
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
        error = InternalError(message="boom", data={"why": ["a", 1]}).to_error()
        await store.transition("err", FAILED, now=T0 + 1, error=error, status_message="boom")
        ok, err = await store.get("ok"), await store.get("err")
        assert ok is not None and ok.result == result and ok.error is None
        assert err is not None and err.error == error and err.result is None

    async def test_transition_keeps_result_when_none(self, store: TaskStore) -> None:
        await store.create(record("t1"))
        error = InternalError(message="x").to_error()
        await store.transition("t1", CANCELLED, now=T0 + 1, error=error)
        got = await store.get("t1")
        assert got is not None and got.error == error

    async def test_same_status_message_update(self, store: TaskStore) -> None:
        await store.create(record("t1", status=WORKING))
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
        wins: list[TaskStatus] = []

        async def go(status: TaskStatus) -> None:
            r = await store.transition("t1", status, now=T0 + 1, expected=NON_TERMINAL)
            if r is not None:
                wins.append(status)

        async with anyio.create_task_group() as tg:
            for s in sorted(TERMINAL) * 5:
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
        bobs = await store.list_tasks("bob", after=None, limit=10)
        assert bobs and all(r.requestor == "bob" for r in bobs)

    async def test_list_after_deleted_key_R_LIST_1(self, store: TaskStore) -> None:
        for i in range(6):
            await store.create(record(f"t{i}", created_at=T0 + i))
        page = await store.list_tasks("alice", after=None, limit=3)
        assert await store.delete("t2")
        rest = await store.list_tasks("alice", after=(page[-1].created_at, "t2"), limit=10)
        assert [r.task_id for r in rest] == ["t3", "t4", "t5"]
        every = await store.list_tasks("alice", after=None, limit=10)
        assert [r.task_id for r in every] == ["t0", "t1", "t3", "t4", "t5"]

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
        again = await store.list_tasks("alice", after=None, limit=5)
        assert [r.task_id for r in again] == ["again"]

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
            await store.create(record(f"t{i}", status=WORKING))
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

    async def test_create_limited_counts_active_R_SEC_4(self, store: TaskStore) -> None:
        assert await store.create_limited(record("t0", status=WORKING), 2) is True
        assert await store.create_limited(record("t1", status=WORKING), 2) is True
        assert await store.create_limited(record("t2", status=WORKING), 2) is False
        assert await store.get("t2") is None  # a refusal writes nothing
        assert await store.create_limited(record("b", "bob"), 1) is True  # per requestor
        await store.transition("t0", COMPLETED, now=T0 + 1)  # terminal tasks do not count
        assert await store.create_limited(record("t2", status=WORKING), 2) is True
        assert await store.count_active("alice") == 2
        assert [r.task_id for r in await store.list_tasks("alice", after=None, limit=9)] == [
            "t0", "t1", "t2"
        ]  # fmt: skip
        with raises(KeyError):
            await store.create_limited(record("t2", status=WORKING), 100)

    async def test_set_ttl_moves_the_expiry_R_TTL_2(self, store: TaskStore) -> None:
        """``set_ttl`` (the engine renews the ttl of running work): ``pop_expired`` goes by
        the new ttl; an unknown task is None."""
        await store.create(record("t1", ttl_ms=1_000, status=WORKING))
        await store.create(record("t2", ttl_ms=1_000))
        got = await store.set_ttl("t1", 10_000)
        assert got is not None and got.ttl_ms == 10_000 and got.expires_at == T0 + 10
        assert got.status == WORKING and got.last_updated_at == T0
        again = await store.get("t1")
        assert again is not None and again.ttl_ms == 10_000
        assert [r.task_id for r in await store.pop_expired(T0 + 5, 100)] == ["t2"]
        assert await store.get("t1") is not None
        shorter = await store.set_ttl("t1", 3_000)  # a ttl may also come closer
        assert shorter is not None and shorter.expires_at == T0 + 3
        assert [r.task_id for r in await store.pop_expired(T0 + 5, 100)] == ["t1"]
        assert await store.set_ttl("nope", 1_000) is None
        await store.create(record("t3", ttl_ms=1_000, status=WORKING))
        assert await store.transition("t3", CANCELLED, now=T0 + 1) is not None
        assert await store.set_ttl("t3", 10_000) is None  # terminal: its ttl stays
        t3 = await store.get("t3")
        assert t3 is not None and t3.ttl_ms == 1_000
        assert await store.count_active("alice") == 0

    async def test_unstorable_text_is_never_a_failure_R_ERR_1(self, store: TaskStore) -> None:
        """A lone surrogate: in a task ID, unknown; in a result or error, stored escaped
        and read back as it was (R-RESULT-1); in a status message, kept with U+FFFD in its
        place (or as it was). A result that is not JSON raises ``UnstorableValue`` and
        changes nothing."""
        for odd in (LONE, f"x{LONE}y"):
            assert await store.get(odd) is None
            assert await store.transition(odd, COMPLETED, now=T0 + 1) is None
            assert await store.delete(odd) is False
        await store.create(record("t1"))
        result = {"content": [{"type": "text", "text": f"odd {LONE} text"}]}
        error = {"code": 7, "message": f"bad {LONE}"}
        got = await store.transition(
            "t1", FAILED, now=T0 + 1, status_message=f"half{LONE}way", result=result, error=error
        )
        assert got is not None
        for rec in (got, await store.get("t1")):
            assert rec is not None and rec.result == result and rec.error == error
            assert rec.status_message in (f"half{LONE}way", "half\ufffdway")
        await store.create(record("t2"))
        try:
            await store.transition("t2", COMPLETED, now=T0 + 1, result={"x": float("nan")})
        except UnstorableValue:
            pass  # a store that encodes refuses it; one that keeps objects may keep it
        else:
            return
        t2 = await store.get("t2")
        assert t2 is not None and t2.status == INITIAL  # nothing changed


class SharedStoreConformance(StoreConformance):
    """For a ``SharedTaskStore``: the plain suite plus the shared protocol (change events,
    input hand-over, leases, cursor secret) between two instances on one backend."""

    #: longest wait for a change event or a lease to run out, in seconds
    patience_s: float = 20.0

    async def make_store(self, tmp_path: Path) -> SharedTaskStore:
        raise NotImplementedError

    async def make_peer(self, store: SharedTaskStore) -> SharedTaskStore:
        """Another instance on ``store``'s backend (as another process would open it)."""
        raise NotImplementedError

    @fixture
    async def pair(self, tmp_path: Path) -> AsyncIterator[tuple[SharedTaskStore, SharedTaskStore]]:
        a = await self.make_store(tmp_path)
        b = await self.make_peer(a)
        try:
            yield a, b
        finally:
            await a.close()
            await b.close()

    @fixture
    async def asking(
        self, pair: tuple[SharedTaskStore, SharedTaskStore]
    ) -> tuple[SharedTaskStore, SharedTaskStore]:
        """``pair`` with alice's task ``t1`` waiting for input."""
        await pair[0].create(record("t1"))
        await pair[0].transition("t1", INPUT_REQUIRED, now=T0 + 1)
        return pair

    async def test_is_shared(self, store: TaskStore) -> None:
        assert isinstance(store, SharedTaskStore) and store.shared is True

    async def test_changes_are_visible_to_peer_R_CANCEL_3(
        self, pair: tuple[SharedTaskStore, SharedTaskStore]
    ) -> None:
        a, b = pair
        await a.create(record("t1"))
        assert (await b.transition("t1", CANCELLED, now=T0 + 1)) is not None
        assert await a.transition("t1", COMPLETED, now=T0 + 2, result={"late": True}) is None
        got = await a.get("t1")
        assert got is not None and got.status == CANCELLED and got.result is None

    async def test_watch_wakes_on_change_from_peer(
        self, pair: tuple[SharedTaskStore, SharedTaskStore]
    ) -> None:
        a, b = pair
        async with running(a, b):
            await b.create(record("t1"))
            with a.watch("t1") as w:
                await w.wait(0.05)  # drain any initial wake-up
                await b.transition("t1", COMPLETED, now=T0 + 1, result={"ok": 1})
                with anyio.fail_after(self.patience_s + 5):
                    assert await w.wait(self.patience_s) is True
            # without a change, wait returns False after its timeout (the fallback poll)
            with a.watch("t1") as w:
                await w.wait(0.05)
                assert await w.wait(0.05) is False

    async def test_input_handover_between_peers_R_INPUT_3(
        self, asking: tuple[SharedTaskStore, SharedTaskStore]
    ) -> None:
        a, b = asking
        item: dict[str, Any] = {"id": "i1", "method": "m", "params": {"message": "ok?"}}
        assert await a.put_input("t1", "alice", item)
        assert await b.claim_inputs("t1", "alice", "b-1", 30) == [item]
        assert await b.claim_inputs("t1", "alice", "b-2", 30) == []  # claimed by b-1
        assert await b.claim_inputs("t1", "alice", "b-1", 30) == [item]  # renewed
        await b.release_input("t1", "alice", "i1", "b-1")  # that call went away
        assert await b.claim_inputs("t1", "alice", "b-2", 30) == [item]
        assert await b.answer_input("t1", "alice", "i1", {"result": {"action": "accept"}})
        assert not await b.answer_input("t1", "alice", "i1", {"result": {}})  # once only
        assert await a.take_answer("t1", "alice", "i1") == {"result": {"action": "accept"}}
        assert await a.take_answer("t1", "alice", "i1") is None
        # a withdrawn input is no longer offered
        await a.put_input("t1", "alice", {"id": "i2", "method": "m", "params": {}})
        await a.withdraw_input("t1", "alice", "i2")
        assert await b.claim_inputs("t1", "alice", "b-3", 30) == []
        # a terminal transition drops the task's inputs
        await a.put_input("t1", "alice", {"id": "i3", "method": "m", "params": {}})
        await a.transition("t1", CANCELLED, now=T0 + 2)
        assert await b.claim_inputs("t1", "alice", "b-4", 30) == []

    async def test_pending_inputs_and_answer_visible_at_once(
        self, asking: tuple[SharedTaskStore, SharedTaskStore]
    ) -> None:
        """``pending_inputs`` lists every outstanding input oldest first (claimed ones too);
        an answer on one instance removes its input from the very next read on any
        instance; an unknown or answered key is refused (X-UPD-7, A-10)."""
        a, b = asking
        second: dict[str, Any] = {"id": "k2", "method": "m", "params": {"n": 2}, "seq": 2}
        first: dict[str, Any] = {"id": "k1", "method": "m", "params": {"n": 1}, "seq": 1}
        assert await a.put_input("t1", "alice", second)
        assert await a.put_input("t1", "alice", first)
        assert await b.pending_inputs("t1", "alice") == [first, second]
        await b.claim_inputs("t1", "alice", "b-1", 30)
        assert await a.pending_inputs("t1", "alice") == [first, second]  # claimed: still there
        assert await b.answer_input("t1", "alice", "k1", {"result": {"ok": 1}})
        assert await a.pending_inputs("t1", "alice") == [second]
        assert await b.pending_inputs("t1", "alice") == [second]
        assert not await a.answer_input("t1", "alice", "k1", {"result": {}})
        assert not await a.answer_input("t1", "alice", "unknown", {"result": {}})
        assert await b.pending_inputs("t1", "mallory") == []
        assert await a.take_answer("t1", "alice", "k1") == {"result": {"ok": 1}}
        await a.transition("t1", CANCELLED, now=T0 + 2)
        assert await b.pending_inputs("t1", "alice") == []

    async def test_input_steps_move_the_status_with_the_inputs_R_INPUT_1_R_INPUT_4(
        self, pair: tuple[SharedTaskStore, SharedTaskStore]
    ) -> None:
        """``offer_input`` queues a request and marks a working task input_required;
        ``answer_inputs`` takes the answers still outstanding and resumes the task when it
        took the last one (else the task keeps waiting); unknown and answered ids change
        nothing, another requestor's answers neither."""
        a, b = pair
        await a.create(record("t1", status=WORKING))
        first: dict[str, Any] = {"id": "k1", "method": "m", "params": {"n": 1}, "seq": 1}
        second: dict[str, Any] = {"id": "k2", "method": "m", "params": {"n": 2}, "seq": 2}
        moved = await a.offer_input("t1", "alice", first, now=T0 + 1, status_message="asking")
        assert moved is not None and moved.status == INPUT_REQUIRED
        assert (moved.status_message, moved.version, moved.last_updated_at) == ("asking", 1, T0 + 1)
        # waiting for input already: queued without a move
        assert await a.offer_input("t1", "alice", second, now=T0 + 2, status_message="x") is None
        assert await b.pending_inputs("t1", "alice") == [first, second]
        got = await b.get("t1")
        assert got is not None and (got.status, got.version) == (INPUT_REQUIRED, 1)
        assert await b.answer_inputs("t1", "mallory", {"k1": {"result": {}}}, now=T0 + 3) == (
            set(),
            None,
        )
        answers: dict[str, dict[str, Any]] = {"k1": {"result": {"n": 1}}, "unknown": {"result": {}}}
        assert await b.answer_inputs("t1", "alice", answers, now=T0 + 3) == ({"k1"}, None)
        assert await a.pending_inputs("t1", "alice") == [second]
        late: dict[str, dict[str, Any]] = {
            "k1": {"result": {"again": True}},
            "k2": {"error": {"code": 1, "message": "no"}},
        }
        taken, moved = await b.answer_inputs("t1", "alice", late, now=T0 + 4)
        assert taken == {"k2"} and moved is not None and moved.status == WORKING
        assert (moved.status_message, moved.version, moved.last_updated_at) == (None, 2, T0 + 4)
        assert await a.pending_inputs("t1", "alice") == []
        assert await a.take_answer("t1", "alice", "k1") == {"result": {"n": 1}}
        assert await a.take_answer("t1", "alice", "k2") == {"error": {"code": 1, "message": "no"}}
        got = await a.get("t1")
        assert got is not None and (got.status, got.version) == (WORKING, 2)

    async def test_resume_only_when_no_input_is_outstanding_R_INPUT_4(
        self, pair: tuple[SharedTaskStore, SharedTaskStore]
    ) -> None:
        a, b = pair
        await a.create(record("t1", status=WORKING))
        item: dict[str, Any] = {"id": "k1", "method": "m", "params": {}, "seq": 1}
        assert await a.offer_input("t1", "alice", item, now=T0 + 1, status_message="?")
        assert await b.resume("t1", "alice", now=T0 + 2) is None  # k1 is outstanding
        await a.withdraw_input("t1", "alice", "k1")
        moved = await b.resume("t1", "alice", now=T0 + 3)
        assert moved is not None and (moved.status, moved.version) == (WORKING, 2)
        assert moved.status_message is None
        assert await a.resume("t1", "alice", now=T0 + 4) is None  # working already
        assert await a.offer_input("nope", "alice", item, now=T0, status_message="?") is None

    async def test_inputs_are_per_requestor_R_SEC_1(
        self, asking: tuple[SharedTaskStore, SharedTaskStore]
    ) -> None:
        a, b = asking
        await a.put_input("t1", "alice", {"id": "i1", "method": "m", "params": {}})
        assert await b.claim_inputs("t1", "mallory", "m-1", 30) == []
        assert not await b.answer_input("t1", "mallory", "i1", {"result": {}})

    async def test_lease_expiry_fails_stopped_instance_tasks(
        self, pair: tuple[SharedTaskStore, SharedTaskStore]
    ) -> None:
        dead, live = pair
        async with running(live):
            async with running(dead):  # leaving it, `dead` stops renewing its lease
                await dead.create(record("d1"))
                await dead.create(record("d2"))
                await dead.transition("d2", INPUT_REQUIRED, now=T0 + 1)
                await dead.create(record("done"))
                await dead.transition("done", COMPLETED, now=T0 + 1, result={"x": 1})
                await live.create(record("mine"))
            reaped: list[TaskRecord] = []
            with anyio.fail_after(self.patience_s + 10):
                while len(reaped) < 2:
                    reaped += await live.recover(T0 + 5, "lease expired")
                    await anyio.sleep(0.1)
        assert sorted(r.task_id for r in reaped) == ["d1", "d2"]
        for tid in ("d1", "d2"):
            r = await live.get(tid)
            assert r is not None and r.status == FAILED and r.status_message == "lease expired"
            assert r.error == InternalError(message="lease expired").to_error()
        done, mine = await live.get("done"), await live.get("mine")
        assert done is not None and done.status == COMPLETED
        assert mine is not None and mine.status == INITIAL  # a live instance's task is untouched
        assert await live.recover(T0 + 6, "again") == []

    async def test_shared_secret_is_shared(
        self, pair: tuple[SharedTaskStore, SharedTaskStore]
    ) -> None:
        a, b = pair
        secret = await a.shared_secret()
        assert secret is None or (isinstance(secret, bytes) and len(secret) >= 16)
        assert await b.shared_secret() == secret
