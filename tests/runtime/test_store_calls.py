"""Store calls per task lifecycle, counted (not timed): what a task costs in the store is
what a durable or shared store pays per task, so a call more is a regression.

The counts are the engine's calls into its store, through a store that counts and
forwards every ``TaskStore`` method to an ``InMemoryTaskStore``."""

from __future__ import annotations

from collections import Counter
from typing import Any, Unpack

import anyio
import pytest

from mcp_tasks.core.handlers import RequestContext
from mcp_tasks.errors import ConcurrencyLimitExceeded, TaskNotFound
from mcp_tasks.protocol import (
    COMPLETED,
    TASKS_GET,
    TASKS_RESULT,
    TOOLS_CALL,
    WORKING,
    TaskStatus,
)
from mcp_tasks.runtime import EngineConfig, InMemoryTaskStore, TaskContext, TaskEngine
from mcp_tasks.runtime.engine import supervisor
from mcp_tasks.store import Change, TaskRecord, TaskStore
from testkit.core_calls import create_task, handle
from testkit.wait import until_async

pytestmark = pytest.mark.anyio

ALICE = RequestContext(requestor="alice")


class Counting(TaskStore):
    """Every ``TaskStore`` call counted by name, then forwarded."""

    def __init__(self) -> None:
        self.inner = InMemoryTaskStore()
        self.calls: Counter[str] = Counter()

    async def create(self, record: TaskRecord) -> None:
        self.calls["create"] += 1
        await self.inner.create(record)

    async def create_limited(self, record: TaskRecord, max_active: int) -> bool:
        self.calls["create_limited"] += 1
        return await self.inner.create_limited(record, max_active)

    async def get(self, task_id: str) -> TaskRecord | None:
        self.calls["get"] += 1
        return await self.inner.get(task_id)

    async def transition(
        self, task_id: str, status: TaskStatus, *, now: float, **change: Unpack[Change]
    ) -> TaskRecord | None:
        self.calls["transition"] += 1
        return await self.inner.transition(task_id, status, now=now, **change)

    async def list_tasks(
        self, requestor: str, *, after: tuple[float, str] | None, limit: int
    ) -> list[TaskRecord]:
        self.calls["list_tasks"] += 1
        return await self.inner.list_tasks(requestor, after=after, limit=limit)

    async def delete(self, task_id: str) -> bool:
        self.calls["delete"] += 1
        return await self.inner.delete(task_id)

    async def pop_expired(self, now: float, limit: int) -> list[TaskRecord]:
        return await self.inner.pop_expired(now, limit)  # the sweeper's, not a task's

    async def count_active(self, requestor: str) -> int:
        self.calls["count_active"] += 1
        return await self.inner.count_active(requestor)


async def work(tc: TaskContext) -> dict[str, Any]:
    return {"content": []}


async def lifecycle(
    engine: TaskEngine, store: Counting, *, settle: bool, get: bool
) -> Counter[str]:
    """Create a task, (let it complete, ``tasks/get`` it,) ``tasks/result`` it: the calls."""
    store.calls.clear()
    tid = (await create_task(engine, ALICE, TOOLS_CALL, work))["task"]["taskId"]
    if settle:
        await until_async(lambda: not engine.running, what="the task's run ended")
    if get:
        assert (await handle(engine, TASKS_GET, {"taskId": tid}, ALICE))["status"] == COMPLETED
    await handle(engine, TASKS_RESULT, {"taskId": tid}, ALICE)
    return store.calls.copy()


async def test_store_calls_per_lifecycle() -> None:
    store = Counting()
    async with TaskEngine(store, EngineConfig(sweep_interval_s=3600)) as engine:
        # tasks/result before the work ran: one read, and the wake-up reads nothing (the
        # run hands over the record it stored); the limit is counted as the task is created.
        assert await lifecycle(engine, store, settle=False, get=False) == Counter(
            create_limited=1, transition=1, get=1
        )
        # Right after the work ended here, tasks/get and tasks/result read nothing: the
        # record its outcome stored is kept for a moment (terminal records do not change).
        assert await lifecycle(engine, store, settle=True, get=False) == Counter(
            create_limited=1, transition=1
        )
        assert await lifecycle(engine, store, settle=True, get=True) == Counter(
            create_limited=1, transition=1
        )


async def test_store_calls_once_the_moment_passed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(supervisor, "RECENT_S", -1.0)
    store = Counting()
    async with TaskEngine(store, EngineConfig(sweep_interval_s=3600)) as engine:
        # create -> complete -> tasks/get -> tasks/result: two writes, two reads.
        assert await lifecycle(engine, store, settle=True, get=True) == Counter(
            create_limited=1, transition=1, get=2
        )


async def test_limit_refusal_writes_nothing_R_SEC_4() -> None:
    store = Counting()
    cfg = EngineConfig(max_active_per_requestor=1, sweep_interval_s=3600)
    release = anyio.Event()

    async def wait(tc: TaskContext) -> dict[str, Any]:
        await release.wait()
        return {"content": []}

    async with TaskEngine(store, cfg) as engine:
        await create_task(engine, ALICE, TOOLS_CALL, wait)
        store.calls.clear()
        with pytest.raises(ConcurrencyLimitExceeded):
            await create_task(engine, ALICE, TOOLS_CALL, wait)
        assert store.calls == Counter(create_limited=1)
        assert len(store.inner) == 1 and engine.running == 1
        release.set()


async def test_status_message_is_one_write() -> None:
    store = Counting()
    said, release = anyio.Event(), anyio.Event()

    async def talk(tc: TaskContext) -> dict[str, Any]:
        await tc.set_status_message("half way")
        said.set()
        await release.wait()
        return {"content": []}

    async with TaskEngine(store, EngineConfig(sweep_interval_s=3600)) as engine:
        tid = (await create_task(engine, ALICE, TOOLS_CALL, talk))["task"]["taskId"]
        await said.wait()
        assert store.calls == Counter(create_limited=1, transition=1)
        task = await handle(engine, TASKS_GET, {"taskId": tid}, ALICE)
        assert (task["status"], task["statusMessage"]) == (WORKING, "half way")
        release.set()


async def test_result_while_the_outcome_is_stored_reads_nothing_R_SEC_1() -> None:
    writing, gate = anyio.Event(), anyio.Event()

    class Held(Counting):
        async def transition(
            self, task_id: str, status: TaskStatus, *, now: float, **change: Unpack[Change]
        ) -> TaskRecord | None:
            writing.set()
            await gate.wait()
            return await super().transition(task_id, status, now=now, **change)

    store = Held()
    got: dict[str, Any] = {}
    async with TaskEngine(store, EngineConfig(sweep_interval_s=3600)) as engine:
        tid = (await create_task(engine, ALICE, TOOLS_CALL, work))["task"]["taskId"]
        await writing.wait()
        run = engine.runs.get(tid)
        assert run is not None and not run.busy  # the work returned; its outcome is written
        # Another requestor is refused at once, as for any task of someone else.
        with pytest.raises(TaskNotFound):
            await handle(engine, TASKS_RESULT, {"taskId": tid}, RequestContext(requestor="bob"))
        store.calls.clear()

        async def result() -> None:
            got["result"] = await handle(engine, TASKS_RESULT, {"taskId": tid}, ALICE)

        async with anyio.create_task_group() as tg:
            tg.start_soon(result)
            await anyio.wait_all_tasks_blocked()
            gate.set()
        # The owner's tasks/result waited for the write and took its record: no read.
        assert store.calls == Counter(transition=1)
        assert got["result"]["content"] == []


async def test_an_id_no_store_could_hold_is_not_found_without_a_store_call_R_SEC_3() -> None:
    """A task id UTF-8 cannot carry (a lone surrogate) is none of ours: ``tasks/get`` and
    ``tasks/result`` answer it not found (R-SEC-1) without asking the store, so junk ids
    cost no store read (R-SEC-3)."""
    store = Counting()
    async with TaskEngine(store, EngineConfig(sweep_interval_s=3600)) as engine:
        store.calls.clear()
        for method in (TASKS_GET, TASKS_RESULT):
            with pytest.raises(TaskNotFound):
                await handle(engine, method, {"taskId": "t-\ud800"}, ALICE)
        assert store.calls == Counter()
