"""A run's one cancel scope (``RunSupervisor._run``): its work runs in it, then its outcome is
stored in it, shielded once the work returned. What that keeps, on a real engine:

- a cancel of the run while its work runs (``tasks/cancel``, the supervisor's ``leave``, the
  cancelled caller of ``adopt``) stops the work, and no outcome of the work is stored;
- a cancel once the work returned, while its outcome is being stored, loses nothing: the
  store finishes, the run still says it was stopped;
- the engine shutting down under the work marks its task interrupted, and shutting down
  while the outcome is being stored does not interrupt that store.

The store records every transition it took; its outcome writes can be held on an event.
No timing: each step waits on an event or a state."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, Unpack

import anyio
import pytest

from mcp_tasks.protocol import CANCELLED, COMPLETED, FAILED, TOOLS_CALL, WORKING, TaskStatus
from mcp_tasks.runtime import EngineConfig, InMemoryTaskStore, TaskContext, TaskEngine
from mcp_tasks.runtime.engine.runs import INTERRUPTED_MESSAGE, Run
from mcp_tasks.store import Change, TaskRecord
from testkit.core_calls import create_task
from testkit.engine_kit import ALICE, call, wound_down
from testkit.wait import until_async

pytestmark = pytest.mark.anyio

RESULT = {"content": [{"type": "text", "text": "done"}], "isError": False}
#: the statuses a run's outcome is stored in (a cancel writes CANCELLED itself)
OUTCOMES = (COMPLETED, FAILED)


class Recording(InMemoryTaskStore):
    """An in-memory store that records the status of every transition it took; while
    ``hold`` is set, an outcome's write waits for it (``writing`` says one arrived)."""

    def __init__(self) -> None:
        super().__init__()
        self.taken: list[TaskStatus] = []
        self.hold: anyio.Event | None = None
        self.writing = anyio.Event()

    async def transition(
        self, task_id: str, status: TaskStatus, *, now: float, **change: Unpack[Change]
    ) -> TaskRecord | None:
        if self.hold is not None and status in OUTCOMES:
            self.writing.set()
            await self.hold.wait()
        rec = await super().transition(task_id, status, now=now, **change)
        if rec is not None:
            self.taken.append(status)
        return rec


def config() -> EngineConfig:
    return EngineConfig(sweep_interval_s=3600)


class Stoppable:
    """A work that says it started, then waits until it is cancelled; ``returns``: it then
    returns a result anyway (work that swallows its cancel), else it lets the cancel out."""

    def __init__(self, returns: bool) -> None:
        self.returns = returns
        self.started = anyio.Event()
        self.cancelled = False

    async def __call__(self, tc: TaskContext) -> dict[str, Any]:
        self.started.set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            self.cancelled = True
            if not self.returns:
                raise
        return RESULT


async def running(engine: TaskEngine, work: Stoppable) -> tuple[str, Run]:
    """A task of ``work`` created and its work started; its id and its run."""
    tid: str = (await create_task(engine, ALICE, TOOLS_CALL, work))["task"]["taskId"]
    await work.started.wait()
    run = engine.runs.get(tid)
    assert run is not None
    return tid, run


async def instant(tc: TaskContext) -> dict[str, Any]:
    return RESULT


def stored_elsewhere(task_id: str) -> TaskRecord:
    """A working task as a front end stored it, for ``adopt``."""
    now = time.time()
    return TaskRecord(task_id, ALICE.requestor, TOOLS_CALL, WORKING, now, now, 60_000)


async def adopting(
    engine: TaskEngine, rec: TaskRecord, work: Callable[[TaskContext], Awaitable[dict[str, Any]]]
) -> tuple[Run, anyio.CancelScope]:
    """``adopt`` of ``rec`` started in a task of the engine's group; the run it made, and
    the scope that cancels the adopting caller (a worker stopping)."""
    tg = engine.task_group
    assert tg is not None
    scope = anyio.CancelScope()

    async def adopt() -> None:
        with scope:
            await engine.runs.adopt(rec, work, tool_error=FAILED)

    tg.start_soon(adopt)
    run: Run = await until_async(lambda: engine.runs.get(rec.task_id), what="the run")
    return run, scope


# ---------------------------------------------------------------- a cancel under the work


@pytest.mark.parametrize("returns", [False, True], ids=["work raises", "work returns"])
async def test_tasks_cancel_under_the_work_stores_no_outcome_of_it(returns: bool) -> None:
    store = Recording()
    work = Stoppable(returns)
    async with TaskEngine(store, config()) as engine:
        tid, run = await running(engine, work)
        cancelled = await call(engine, "tasks/cancel", taskId=tid)
        assert cancelled["status"] == "cancelled"
        await wound_down(engine)
        assert work.cancelled and run.stopped and not run.busy
        assert run.final is None  # the run stored no outcome
        rec = await store.get(tid)
        assert rec is not None and rec.status == CANCELLED and rec.result is None
        assert store.taken == [CANCELLED]  # the cancel's write only
    await store.close()


@pytest.mark.parametrize("returns", [False, True], ids=["work raises", "work returns"])
async def test_leave_under_the_work_stores_no_outcome_of_it(returns: bool) -> None:
    store = Recording()
    work = Stoppable(returns)
    async with TaskEngine(store, config()) as engine:
        tid, run = await running(engine, work)
        await engine.runs.leave(30)
        assert engine.runs.get(tid) is None
        assert work.cancelled and run.stopped and run.final is None
        # Left for whoever runs it next: neither the work's result nor "interrupted".
        rec = await store.get(tid)
        assert rec is not None and rec.status == WORKING and rec.result is None
        assert store.taken == []
    await store.close()


@pytest.mark.parametrize("returns", [False, True], ids=["work raises", "work returns"])
async def test_cancelled_adopt_under_the_work_stores_no_outcome_of_it(returns: bool) -> None:
    store = Recording()
    work = Stoppable(returns)
    rec = stored_elsewhere("adopted-1")
    await store.create(rec)
    async with TaskEngine(store, config()) as engine:
        run, caller = await adopting(engine, rec, work)
        await work.started.wait()
        caller.cancel()  # the adopting worker stops
        await wound_down(engine)
        assert work.cancelled and run.stopped and run.final is None
        got = await store.get(rec.task_id)
        assert got is not None and got.status == WORKING and got.result is None
        assert store.taken == []
    await store.close()


# ---------------------------------------------------------------- a cancel as the outcome is stored


@pytest.mark.parametrize("how", ["stop", "cancel", "leave", "adopt"])
async def test_a_cancel_while_the_outcome_is_stored_loses_nothing(how: str) -> None:
    store = Recording()
    store.hold = anyio.Event()
    async with TaskEngine(store, config()) as engine:
        caller: anyio.CancelScope | None = None
        if how == "adopt":
            adopted = stored_elsewhere("adopted-2")
            await store.create(adopted)
            run, caller = await adopting(engine, adopted, instant)
            tid = adopted.task_id
        else:
            tid = (await create_task(engine, ALICE, TOOLS_CALL, instant))["task"]["taskId"]
            found = engine.runs.get(tid)
            assert found is not None
            run = found
        await store.writing.wait()
        assert not run.busy and engine.runs.get(tid) is run  # the work returned; storing
        async with anyio.create_task_group() as tg:
            if how == "stop":
                engine.runs.stop(tid)  # ended elsewhere, as the cancel path and sweeps call it
            elif how == "cancel":
                run.cancel()
            elif how == "leave":
                tg.start_soon(engine.runs.leave, 30)
            else:
                assert caller is not None
                caller.cancel()  # the adopting worker stops
            await anyio.wait_all_tasks_blocked()
            assert run.stopped
            assert engine.runs.get(tid) is run  # still storing: nothing interrupted it
            store.hold.set()
        await wound_down(engine)
        rec = await store.get(tid)
        assert rec is not None and rec.status == COMPLETED and rec.result == RESULT
        assert run.final is not None and run.final.status == COMPLETED
        assert run.stopped
        assert store.taken == [COMPLETED]
        if how != "adopt":
            result = await call(engine, "tasks/result", taskId=tid)
            assert result["content"] == RESULT["content"]
    await store.close()


# ---------------------------------------------------------------- the engine shutting down


async def test_shutdown_under_the_work_marks_it_interrupted() -> None:
    store = Recording()
    work = Stoppable(returns=False)
    async with TaskEngine(store, config()) as engine:
        tid, run = await running(engine, work)
    # the engine stopped while its work ran
    assert work.cancelled and not run.stopped  # not a cancel of the run
    rec = await store.get(tid)
    assert rec is not None and rec.status == FAILED
    assert rec.status_message == INTERRUPTED_MESSAGE and rec.error is not None
    assert rec.error["message"] == INTERRUPTED_MESSAGE and rec.result is None
    assert run.final == rec and store.taken == [FAILED]
    await store.close()


async def test_shutdown_while_the_outcome_is_stored_does_not_interrupt_it() -> None:
    store = Recording()
    store.hold = hold = anyio.Event()
    async with anyio.create_task_group() as outside:
        async with TaskEngine(store, config()) as engine:
            tid = (await create_task(engine, ALICE, TOOLS_CALL, instant))["task"]["taskId"]
            await store.writing.wait()
            run = engine.runs.get(tid)
            assert run is not None and not run.busy
            group = engine.task_group
            assert group is not None

            async def release_once_closing() -> None:
                await until_async(lambda: group.cancel_scope.cancel_called, what="the exit")
                hold.set()

            outside.start_soon(release_once_closing)
        # the engine's exit waited for the store it did not interrupt
    rec = await store.get(tid)
    assert rec is not None and rec.status == COMPLETED and rec.result == RESULT
    assert run.final == rec and store.taken == [COMPLETED] and not run.stopped
    await store.close()
