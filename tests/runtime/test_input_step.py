"""Taking the last outstanding answer and resuming the task is one step, on every store: a
work that asks again at the instant ``answer()`` moves its task back to ``working`` is never
seen ``working`` while its new request is outstanding, and nobody is told of a status the
task passed through only because two writes raced (R-INPUT-1, R-INPUT-4, A-10).

The race is made deterministic: the store holds the first write that moves the task to
``working`` after the answer began (where a resume was a write of its own, after the
answers were taken) until the work has begun asking again."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Unpack

import anyio
import pytest

from mcp_tasks.protocol import (
    COMPLETED,
    ELICITATION_CREATE,
    INPUT_REQUIRED,
    TOOLS_CALL,
    WORKING,
    TaskStatus,
)
from mcp_tasks.runtime import (
    EngineConfig,
    InMemoryTaskStore,
    SqliteTaskStore,
    TaskContext,
    TaskEngine,
    TaskView,
)
from mcp_tasks.runtime.stores.redis import RedisTaskStore
from mcp_tasks.store import Change, TaskRecord, TaskStore
from testkit.redis_fixtures import RedisServer, unique_namespace
from testkit.wait import until_async

pytestmark = pytest.mark.anyio

FACE = "another-face"
#: a task asked twice, as reported: asked, resumed, asked again, resumed, done
ASKED_TWICE = [
    (INPUT_REQUIRED, 1),
    (WORKING, 2),
    (INPUT_REQUIRED, 3),
    (WORKING, 4),
    (COMPLETED, 5),
]


class Gate:
    """Once armed, holds the first write moving a task to ``working`` until released."""

    def __init__(self) -> None:
        self.armed = False
        self.held = anyio.Event()
        self.release = anyio.Event()

    async def passing(self, status: TaskStatus) -> None:
        if self.armed and status == WORKING:
            self.armed = False
            self.held.set()
            await self.release.wait()


class Gated(TaskStore):
    """A store whose ``transition`` passes its ``gate`` first (mixed in before a store)."""

    gate: Gate

    async def transition(
        self, task_id: str, status: TaskStatus, *, now: float, **change: Unpack[Change]
    ) -> TaskRecord | None:
        await self.gate.passing(status)
        # the store it is mixed into answers (never TaskStore's abstract method)
        return await super().transition(  # type: ignore[safe-super]
            task_id, status, now=now, **change
        )


class GatedMemory(Gated, InMemoryTaskStore):
    def __init__(self, gate: Gate) -> None:
        super().__init__()
        self.gate = gate


class GatedSqlite(Gated, SqliteTaskStore):
    def __init__(self, gate: Gate, path: Path) -> None:
        super().__init__(path)
        self.gate = gate


class GatedRedis(Gated, RedisTaskStore):
    def __init__(self, gate: Gate, url: str) -> None:
        super().__init__(url, namespace=unique_namespace())
        self.gate = gate


@pytest.fixture(params=["memory", "sqlite", "redis"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[Gate], TaskStore]:
    if request.param == "memory":
        return GatedMemory
    if request.param == "sqlite":
        return lambda gate: GatedSqlite(gate, tmp_path / "tasks.db")
    server: RedisServer = request.getfixturevalue("redis_server")
    return lambda gate: GatedRedis(gate, server.url)


class Seen:
    """Every status change the engine reports: (status, version)."""

    def __init__(self) -> None:
        self.changes: list[tuple[TaskStatus, int]] = []

    async def __call__(self, rec: TaskRecord) -> None:
        self.changes.append((rec.status, rec.version))


@pytest.fixture
async def gated(
    make_store: Callable[[Gate], TaskStore],
) -> AsyncIterator[tuple[TaskEngine, Gate, Seen]]:
    gate, seen = Gate(), Seen()
    store = make_store(gate)
    try:
        # No ttl renewal under the held work: the versions seen count status writes only.
        config = EngineConfig(sweep_interval_s=3600, keep_running_tasks=False)
        async with TaskEngine(store, config) as engine:
            engine.on_status.append(seen)
            yield engine, gate, seen
    finally:
        await store.close()


async def view_until(engine: TaskEngine, tid: str, check: Callable[[TaskView], bool]) -> TaskView:
    view: TaskView = await until_async(
        lambda: engine.view("alice", tid, face=FACE), satisfied=check, what=f"task {tid}"
    )
    return view


class AsksTwice:
    """A work that asks ``q1`` (through ``first``, which sets ``go`` once it stops
    waiting), then, once ``go`` is set, ``q2``; its result holds the answers it got.
    :meth:`hold`: while the gate holds a resume, let the work ask again, then release."""

    def __init__(
        self, gate: Gate, first: Callable[[TaskContext, dict[str, Any]], Awaitable[None]]
    ) -> None:
        self.gate, self.first = gate, first
        self.go, self.entered = anyio.Event(), anyio.Event()

    async def work(self, tc: TaskContext) -> dict[str, Any]:
        answers: dict[str, Any] = {}

        async def first() -> None:
            await self.first(tc, answers)
            self.go.set()  # no store write was held: ask again now

        async def second() -> None:
            await self.go.wait()
            self.entered.set()
            answers["q2"] = await tc.request_input(ELICITATION_CREATE, {"message": "q2"})

        async with anyio.create_task_group() as tg:
            tg.start_soon(first)
            tg.start_soon(second)
        return {"content": [], "structuredContent": answers}

    async def hold(self) -> None:
        await self.gate.held.wait()
        self.go.set()
        await self.entered.wait()
        self.gate.release.set()


async def answer_q2(engine: TaskEngine, again: TaskView) -> TaskView:
    """``again`` asks ``q2`` alone: answer it and wait for the task to complete."""
    assert again.record.status == INPUT_REQUIRED
    assert [i.params["message"] for i in again.inputs] == ["q2"]
    q2, tid = again.inputs[0], again.record.task_id
    assert await engine.answer("alice", tid, {q2.key: {"n": 2}}, face=FACE) == {q2.key}
    return await view_until(engine, tid, lambda v: v.record.status == COMPLETED)


async def test_asking_again_while_the_answer_resumes_R_INPUT_1_R_INPUT_4(
    gated: tuple[TaskEngine, Gate, Seen],
) -> None:
    engine, gate, seen = gated

    async def ask_q1(tc: TaskContext, answers: dict[str, Any]) -> None:
        answers["q1"] = await tc.request_input(ELICITATION_CREATE, {"message": "q1"})

    asks = AsksTwice(gate, ask_q1)
    rec = await engine.start("alice", FACE, TOOLS_CALL, asks.work, tool_error=COMPLETED)
    tid = rec.task_id
    q1 = (await view_until(engine, tid, lambda v: len(v.inputs) == 1)).inputs[0]
    async with anyio.create_task_group() as tg:
        tg.start_soon(asks.hold)
        gate.armed = True
        try:
            assert await engine.answer("alice", tid, {q1.key: {"n": 1}}, face=FACE) == {q1.key}
            again = await view_until(engine, tid, lambda v: bool(v.inputs) or v.record.version > 3)
        finally:
            gate.release.set()
        tg.cancel_scope.cancel()
    done = await answer_q2(engine, again)
    assert done.record.result is not None
    assert done.record.result["structuredContent"] == {"q1": {"n": 1}, "q2": {"n": 2}}
    # Every change of the task was reported, once, in order: asked, resumed, asked again,
    # resumed, done; no working while q2 was outstanding, no re-mark after it.
    assert seen.changes == ASKED_TWICE, [(s.value, v) for s, v in seen.changes]
    assert done.record.version == 5


async def test_asking_again_while_the_work_resumes_R_INPUT_1_R_INPUT_4(
    gated: tuple[TaskEngine, Gate, Seen],
) -> None:
    """The work stops waiting for one request (its wait is cancelled) and asks another at
    the instant its task goes back to ``working``: the task ends up ``input_required`` with
    the new request, never ``working`` with it outstanding."""
    engine, gate, seen = gated
    scopes: list[anyio.CancelScope] = []

    async def ask_q1(tc: TaskContext, answers: dict[str, Any]) -> None:
        with anyio.CancelScope() as scope:
            scopes.append(scope)
            await tc.request_input(ELICITATION_CREATE, {"message": "q1"})

    asks = AsksTwice(gate, ask_q1)
    rec = await engine.start("alice", FACE, TOOLS_CALL, asks.work, tool_error=COMPLETED)
    tid = rec.task_id
    await view_until(engine, tid, lambda v: len(v.inputs) == 1)
    async with anyio.create_task_group() as tg:
        tg.start_soon(asks.hold)
        gate.armed = True
        scopes[0].cancel()  # the work stops waiting for q1
        # Stuck working with q2 outstanding would never show q2 (bounded wait).
        try:
            again = await until_async(
                lambda: engine.view("alice", tid, face=FACE),
                20,
                satisfied=lambda v: [i.params["message"] for i in v.inputs] == ["q2"],
                what="the second request shown",
            )
        finally:
            gate.release.set()
        tg.cancel_scope.cancel()
    done = await answer_q2(engine, again)
    assert done.record.result is not None
    assert done.record.result["structuredContent"] == {"q2": {"n": 2}}
    assert seen.changes == ASKED_TWICE, [(s.value, v) for s, v in seen.changes]
