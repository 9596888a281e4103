"""TaskEngine against every store: status notifications, input requests and their
answers; each test names the receiver rule it checks.

The engine fixtures (``engine``, ``make_engine``, ``store_factory``: memory, SQLite, Redis;
``clock``) come from ``testkit.engine_kit`` through the runtime tests' conftest."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest

from mcp_tasks.core.meta import RELATED_TASK_KEY
from mcp_tasks.errors import JsonRpcError, TaskError
from mcp_tasks.runtime import CoreTasks, TaskContext, TaskEngine
from mcp_tasks.store import TaskRecord
from testkit.core_calls import Asked, create_task, handle
from testkit.engine_kit import ALICE, call, gate, instant, wait_status, wound_down

pytestmark = pytest.mark.anyio


# ---------------------------------------------------------------- notifications, input, progress


async def test_status_hook_whole_task_no_related_meta_R_NOTIFY_1_R_NOTIFY_3(
    make_engine: Callable[..., TaskEngine],
) -> None:
    seen: list[tuple[str, dict[str, Any]]] = []

    async def on_status(rec: TaskRecord) -> None:  # rendered as the core face tells it
        method, task = CoreTasks(eng).status_notification(rec)
        assert method == "notifications/tasks/status"
        seen.append((rec.requestor, task))

    async with make_engine(on_status=on_status) as eng:
        tid = (await create_task(eng, ALICE, "tools/call", instant))["task"]["taskId"]
        await call(eng, "tasks/result", taskId=tid)
        ev, work = gate()
        tid2 = (await create_task(eng, ALICE, "tools/call", work))["task"]["taskId"]
        await call(eng, "tasks/cancel", taskId=tid2)
    assert [(r, t["taskId"], t["status"]) for r, t in seen] == [
        ("alice", tid, "completed"),
        ("alice", tid2, "cancelled"),
    ]
    for _, t in seen:
        assert "_meta" not in t and {"createdAt", "lastUpdatedAt", "ttl"} <= set(t)


async def test_input_required_roundtrip_R_INPUT_1_R_INPUT_2_R_INPUT_3_R_INPUT_4(
    engine: TaskEngine,
) -> None:
    statuses: list[str] = []

    async def work(tc: TaskContext) -> dict[str, Any]:
        answer = await tc.request_input(
            "elicitation/create", {"message": "name?", "requestedSchema": {}}
        )
        statuses.append((await engine.store.get(tc.task_id)).status.value)  # type: ignore[union-attr]
        return {"content": [{"type": "text", "text": f"hi {answer['content']['name']}"}]}

    tid = (await create_task(engine, ALICE, "tools/call", work))["task"]["taskId"]
    await wait_status(engine, tid, "input_required")
    asked: list[Asked] = []

    async def on_input(p: Asked) -> dict[str, Any]:
        asked.append(p)
        return {"action": "accept", "content": {"name": "Ada"}}

    got = await handle(engine, "tasks/result", {"taskId": tid}, ALICE, on_input=on_input)
    assert got["content"][0]["text"] == "hi Ada"
    assert [p.method for p in asked] == ["elicitation/create"]
    assert asked[0].params["_meta"] == {RELATED_TASK_KEY: {"taskId": tid}}
    assert statuses == ["working"]  # back to working once answered


async def test_input_redelivered_when_waiter_leaves_R_INPUT_3(engine: TaskEngine) -> None:
    async def work(tc: TaskContext) -> dict[str, Any]:
        return await tc.request_input("sampling/createMessage", {"messages": []})

    tid = (await create_task(engine, ALICE, "tools/call", work))["task"]["taskId"]
    await wait_status(engine, tid, "input_required")

    delivered = anyio.Event()

    async def never(p: Asked) -> dict[str, Any]:  # takes the input request, never answers
        delivered.set()
        await anyio.sleep_forever()
        return {}

    async with anyio.create_task_group() as tg:  # the waiter leaves mid-delivery
        tg.start_soon(
            lambda: handle(engine, "tasks/result", {"taskId": tid}, ALICE, on_input=never)
        )
        with anyio.fail_after(30):
            await delivered.wait()
        tg.cancel_scope.cancel()

    async def answer(p: Asked) -> dict[str, Any]:
        return {"role": "assistant", "content": {"type": "text", "text": "x"}}

    with anyio.fail_after(30):
        got = await handle(engine, "tasks/result", {"taskId": tid}, ALICE, on_input=answer)
    assert got["role"] == "assistant"


async def test_input_error_answer_reaches_work_R_INPUT_4(engine: TaskEngine) -> None:
    async def work(tc: TaskContext) -> dict[str, Any]:
        try:
            await tc.request_input("elicitation/create", {})
        except TaskError as exc:
            return {"content": [{"type": "text", "text": exc.message}]}
        return {}

    tid = (await create_task(engine, ALICE, "tools/call", work))["task"]["taskId"]
    await wait_status(engine, tid, "input_required")

    async def refuse(p: Asked) -> dict[str, Any]:
        raise JsonRpcError(-1, "user declined")

    got = await handle(engine, "tasks/result", {"taskId": tid}, ALICE, on_input=refuse)
    assert got["content"][0]["text"] == "user declined"


async def test_cancel_while_waiting_for_input_R_INPUT_1_R_CANCEL_2(engine: TaskEngine) -> None:
    async def work(tc: TaskContext) -> dict[str, Any]:
        return await tc.request_input("elicitation/create", {})

    tid = (await create_task(engine, ALICE, "tools/call", work))["task"]["taskId"]
    await wait_status(engine, tid, "input_required")
    assert (await call(engine, "tasks/cancel", taskId=tid))["status"] == "cancelled"
    await wound_down(engine)
    assert (await call(engine, "tasks/get", taskId=tid))["status"] == "cancelled"


def test_each_input_request_is_claimed_by_one_waiter_R_INPUT_3() -> None:
    """The waiters of a task (its ``tasks/result`` streams) claim its input requests: one
    claimed is not handed to the next waiter, one made since is; an answered one leaves."""
    from mcp_tasks.runtime.engine.runs import PendingInput, RunInputs

    inputs = RunInputs()
    first = PendingInput("i1", "t1", "elicitation/create", {})
    inputs.add(first)
    assert inputs.claim() == [first]
    assert inputs.claim() == []  # another waiter: nothing left to deliver
    second = PendingInput("i2", "t1", "elicitation/create", {}, seq=1)
    inputs.add(second)
    assert inputs.claim() == [second]
    assert inputs.take({"i1": {"action": "accept"}, "nosuch": {}}) == {"i1"}
    assert first.answered.is_set() and first.answer == {"action": "accept"}
    assert list(inputs.pending) == ["i2"] and inputs.outstanding()
