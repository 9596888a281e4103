"""The protocol-neutral engine API a second face calls (no wire format anywhere here):
start / view / answer / cancel, read-your-writes after answering (A-10, also across two
engines on one Redis), unknown keys ignored (X-UPD-7, A-9), the ``tool_error`` status of an
``isError`` result, and a face that cannot see another face's task (X-SEC-2)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_tasks.core.handlers import RequestContext
from mcp_tasks.errors import TaskNotFound
from mcp_tasks.protocol import (
    CANCELLED,
    COMPLETED,
    ELICITATION_CREATE,
    FAILED,
    INPUT_REQUIRED,
    REVISION,
    TOOLS_CALL,
    WORKING,
    TaskStatus,
)
from mcp_tasks.runtime import EngineConfig, TaskContext, TaskEngine, TaskView
from mcp_tasks.runtime.stores.redis import RedisTaskStore
from mcp_tasks.store import TaskRecord, TaskStore
from testkit.core_calls import handle
from testkit.engine_kit import STORES, store_maker
from testkit.redis_fixtures import RedisServer, unique_namespace
from testkit.wait import until_async

pytestmark = pytest.mark.anyio

#: A face other than the generated revision's (what the extension face will be).
OTHER = "another-face"


class Recorder:
    """A status listener: the status changes of the other face's tasks."""

    def __init__(self) -> None:
        self.seen: list[TaskStatus] = []

    async def __call__(self, rec: TaskRecord) -> None:
        if rec.face == OTHER:
            self.seen.append(rec.status)


@pytest.fixture(params=STORES)
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], TaskStore]:
    return store_maker(request.param, tmp_path, request)


@pytest.fixture
async def engine(make_store: Callable[[], TaskStore]) -> AsyncIterator[TaskEngine]:
    store = make_store()
    try:
        async with TaskEngine(store, EngineConfig(sweep_interval_s=3600)) as eng:
            eng.on_status.append(Recorder())
            yield eng
    finally:
        await store.close()


def asking(n: int) -> Callable[[TaskContext], Any]:
    """Work that asks ``n`` questions at once and returns the answers in order."""

    async def work(tc: TaskContext) -> dict[str, Any]:
        answers: list[dict[str, Any]] = [{}] * n

        async def ask(i: int) -> None:
            answers[i] = await tc.request_input(ELICITATION_CREATE, {"message": f"q{i}"})

        async with anyio.create_task_group() as tg:
            for i in range(n):
                tg.start_soon(ask, i)
        return {"content": [], "structuredContent": {"answers": answers}}

    return work


async def until(engine: TaskEngine, tid: str, check: Callable[[TaskView], bool]) -> TaskView:
    """The task's view once ``check`` holds for it."""
    view: TaskView = await until_async(
        lambda: engine.view("alice", tid, face=OTHER), satisfied=check, what=f"task {tid}"
    )
    return view


async def test_create_is_stored_before_it_returns(engine: TaskEngine) -> None:
    release = anyio.Event()

    async def work(tc: TaskContext) -> dict[str, Any]:
        await release.wait()
        return {"content": []}

    rec = await engine.start("alice", OTHER, TOOLS_CALL, work, tool_error=COMPLETED)
    assert rec.face == OTHER and rec.ttl_ms == engine.config.default_ttl_ms
    view = await engine.view("alice", rec.task_id, face=OTHER)  # X-CREATE-3
    assert view.record.task_id == rec.task_id and view.inputs == ()
    release.set()
    done = await until(engine, rec.task_id, lambda v: v.record.status == COMPLETED)
    assert done.record.result == {"content": []}


async def test_ttl_asked_for_is_clamped_R_TTL_2(engine: TaskEngine) -> None:
    cap = engine.config.max_ttl_ms
    rec = await engine.start(
        "alice", OTHER, TOOLS_CALL, asking(0), ttl_ms=cap * 10, tool_error=COMPLETED
    )
    assert rec.ttl_ms == cap


@pytest.mark.parametrize("tool_error", [COMPLETED, FAILED])
async def test_is_error_result_ends_in_tool_error(
    engine: TaskEngine, tool_error: TaskStatus
) -> None:
    async def work(tc: TaskContext) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": "bad"}], "isError": True}

    rec = await engine.start("alice", OTHER, TOOLS_CALL, work, tool_error=tool_error)
    done = await until(engine, rec.task_id, lambda v: v.record.status == tool_error)
    assert done.record.result is not None and done.record.result["isError"] is True


async def test_view_lists_inputs_and_partial_answer_is_read_your_writes_A_10(
    engine: TaskEngine,
) -> None:
    rec = await engine.start("alice", OTHER, TOOLS_CALL, asking(2), tool_error=COMPLETED)
    tid = rec.task_id
    view = await until(engine, tid, lambda v: len(v.inputs) == 2)
    assert view.record.status == INPUT_REQUIRED
    assert [i.params["message"] for i in view.inputs] == ["q0", "q1"]  # creation order
    assert all("_meta" not in i.params for i in view.inputs)  # no wire stamping
    first, second = view.inputs
    # an unknown key is ignored whatever its value (X-UPD-7, A-9)
    taken = await engine.answer(
        "alice", tid, {first.key: {"action": "accept"}, "unknown": {"ignored": True}}, face=OTHER
    )
    assert taken == {first.key}
    after = await engine.view("alice", tid, face=OTHER)  # the very next read
    assert after.record.status == INPUT_REQUIRED
    assert [i.key for i in after.inputs] == [second.key]
    assert await engine.answer("alice", tid, {first.key: {"action": "x"}}, face=OTHER) == set()
    assert await engine.answer("alice", tid, {second.key: {"action": "decline"}}, face=OTHER) == {
        second.key
    }
    moved = await engine.view("alice", tid, face=OTHER)
    assert moved.record.status in (WORKING, COMPLETED) and moved.inputs == ()
    done = await until(engine, tid, lambda v: v.record.status == COMPLETED)
    assert done.record.result is not None
    assert done.record.result["structuredContent"] == {
        "answers": [{"action": "accept"}, {"action": "decline"}]
    }


async def test_cancel_moves_once(engine: TaskEngine) -> None:
    rec = await engine.start("alice", OTHER, TOOLS_CALL, asking(1), tool_error=COMPLETED)
    new, moved = await engine.cancel("alice", rec.task_id, face=OTHER)
    assert moved and new.status == CANCELLED
    again, moved_again = await engine.cancel("alice", rec.task_id, face=OTHER)
    assert not moved_again and again.status == CANCELLED
    assert await engine.answer("alice", rec.task_id, {"k": {}}, face=OTHER) == set()


async def test_status_changes_go_to_the_records_face(engine: TaskEngine) -> None:
    face = engine.on_status[0]
    assert isinstance(face, Recorder)
    rec = await engine.start("alice", OTHER, TOOLS_CALL, asking(0), tool_error=COMPLETED)
    await until(engine, rec.task_id, lambda v: v.record.status == COMPLETED)
    assert face.seen[-1] == COMPLETED


async def test_a_face_cannot_see_another_faces_task_X_SEC_2(engine: TaskEngine) -> None:
    """Another face's task (or another requestor's) answers exactly like an unknown one."""
    theirs = await engine.start("alice", REVISION, TOOLS_CALL, asking(1), tool_error=FAILED)
    ours = await engine.start("alice", OTHER, TOOLS_CALL, asking(1), tool_error=COMPLETED)
    tid = theirs.task_id
    for call in (
        engine.view("alice", tid, face=OTHER),
        engine.answer("alice", tid, {"k": {}}, face=OTHER),
        engine.cancel("alice", tid, face=OTHER),
        engine.view("bob", ours.task_id, face=OTHER),
    ):
        with pytest.raises(TaskNotFound):
            await call
    # the 2025 face lists only its own tasks
    page, _ = await engine.list_page("alice", None, face=REVISION)
    assert [r.task_id for r in page] == [tid]
    with pytest.raises(TaskNotFound):
        await handle(engine, "tasks/get", {"taskId": ours.task_id}, RequestContext("alice"))


async def test_answer_on_one_instance_is_visible_on_the_other_A_10(
    redis_server: RedisServer,
) -> None:
    """Two engines on one Redis: the work runs on ``a``, ``b`` answers; ``a`` and ``b``
    both see the answered key gone on their very next view."""
    ns = unique_namespace()
    sa = RedisTaskStore(redis_server.url, namespace=ns)
    sb = RedisTaskStore(redis_server.url, namespace=ns)
    cfg = EngineConfig(sweep_interval_s=3600)
    try:
        async with TaskEngine(sa, cfg) as a, TaskEngine(sb, cfg) as b:
            rec = await a.start("alice", OTHER, TOOLS_CALL, asking(2), tool_error=COMPLETED)
            tid = rec.task_id
            view = await until(b, tid, lambda v: len(v.inputs) == 2)
            first, second = view.inputs
            assert await b.answer("alice", tid, {first.key: {"n": 1}}, face=OTHER) == {first.key}
            for eng in (a, b):
                seen = await eng.view("alice", tid, face=OTHER)
                assert seen.record.status == INPUT_REQUIRED
                assert [i.key for i in seen.inputs] == [second.key]
            assert await a.answer("alice", tid, {second.key: {"n": 2}}, face=OTHER) == {second.key}
            assert (await b.view("alice", tid, face=OTHER)).inputs == ()
            done = await until(b, tid, lambda v: v.record.status == COMPLETED)
            assert done.record.result is not None
            assert done.record.result["structuredContent"] == {"answers": [{"n": 1}, {"n": 2}]}
    finally:
        await sa.close()
        await sb.close()


async def test_a_result_never_waits_on_a_stuck_status_listener_R_RESULT_2(
    engine: TaskEngine,
) -> None:
    """A listener of ``on_status`` that blocks (a custom notifier, a stalled stream) does not
    hold back the end of ``wait_terminal``: the waiters are woken before the listeners run."""
    stuck = anyio.Event()
    entered = anyio.Event()

    async def stuck_listener(rec: TaskRecord) -> None:
        if rec.status == COMPLETED:
            entered.set()
            await stuck.wait()

    engine.on_status.append(stuck_listener)
    release = anyio.Event()

    async def work(tc: TaskContext) -> dict[str, Any]:
        await release.wait()
        return {"content": [], "structuredContent": {"n": 1}}

    rec = await engine.start("alice", OTHER, TOOLS_CALL, work, tool_error=COMPLETED)
    release.set()
    try:
        with anyio.fail_after(10):
            done = await engine.wait_terminal("alice", rec.task_id, face=OTHER)
        assert done.status == COMPLETED and done.result == {
            "content": [],
            "structuredContent": {"n": 1},
        }
        with anyio.fail_after(10):
            await entered.wait()  # the listener was told too, and is still stuck
    finally:
        stuck.set()
