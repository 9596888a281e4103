"""TaskEngine against every store: creating tasks, their lifecycle, waiting on results,
cancelling, TTL, starting and stopping; each test names the receiver rule it checks.

The engine fixtures (``engine``, ``make_engine``, ``store_factory``: memory, SQLite, Redis;
``clock``) come from ``testkit.engine_kit`` through the runtime tests' conftest."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

import anyio
import pytest

from mcp_tasks.core.meta import RELATED_TASK_KEY
from mcp_tasks.errors import JsonRpcError, TaskError
from mcp_tasks.runtime import TaskContext, TaskEngine
from testkit.core_calls import create_task
from testkit.engine_kit import (
    ALICE,
    BOB,
    EXPIRED,
    NOT_FOUND,
    Clock,
    call,
    expect_error,
    gate,
    instant,
    started_gate,
    waiting_on,
    wound_down,
)
from testkit.wait import until_async

pytestmark = pytest.mark.anyio

RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


# ---------------------------------------------------------------- creating, lifecycle


async def test_create_answers_at_once_working_R_CREATE_2_R_STATE_1(engine: TaskEngine) -> None:
    ev, work = gate()
    created = await create_task(engine, ALICE, "tools/call", work)
    task = created["task"]
    assert task["status"] == "working"
    assert set(task) >= {"taskId", "status", "createdAt", "lastUpdatedAt", "ttl"}
    assert "_meta" not in created
    ev.set()
    await call(engine, "tasks/result", taskId=task["taskId"])


async def test_ids_secure_and_unique_R_ID_1_R_ID_2(engine: TaskEngine) -> None:
    ids = {
        (await create_task(engine, ALICE, "tools/call", instant))["task"]["taskId"]
        for _ in range(50)
    }
    assert len(ids) == 50
    for tid in ids:
        # token_urlsafe(16): 22 url-safe characters, 128 bits
        assert re.fullmatch(r"[A-Za-z0-9_-]{22}", tid)


async def test_completed_result_exact_with_related_meta_R_RESULT_1_R_RESULT_3_R_RESULT_4(
    engine: TaskEngine,
) -> None:
    result = {
        "content": [{"type": "text", "text": "héllo"}],
        "structuredContent": {"a": [1, 2.5, None]},
        "_meta": {"custom": True},
    }

    async def work(tc: TaskContext) -> dict[str, Any]:
        return result

    tid = (await create_task(engine, ALICE, "tools/call", work))["task"]["taskId"]
    got = await call(engine, "tasks/result", taskId=tid)
    assert got == {**result, "_meta": {"custom": True, RELATED_TASK_KEY: {"taskId": tid}}}
    t = await call(engine, "tasks/get", taskId=tid)
    assert t["status"] == "completed" and "_meta" not in t  # R-META-3


async def test_is_error_result_is_failed_with_message_R_STATE_4(engine: TaskEngine) -> None:
    bad = {"content": [{"type": "text", "text": "disk full"}], "isError": True}

    async def work(tc: TaskContext) -> dict[str, Any]:
        return bad

    tid = (await create_task(engine, ALICE, "tools/call", work))["task"]["taskId"]
    got = await call(engine, "tasks/result", taskId=tid)
    assert got["isError"] is True and got["content"] == bad["content"]
    t = await call(engine, "tasks/get", taskId=tid)
    assert t["status"] == "failed" and "disk full" in t["statusMessage"]  # R-ERR-3


async def test_raised_jsonrpc_error_stored_R_RESULT_1_R_STATE_4_R_ERR_3(engine: TaskEngine) -> None:
    async def work(tc: TaskContext) -> dict[str, Any]:
        raise JsonRpcError(-32042, "upstream said no", {"retry": False})

    tid = (await create_task(engine, ALICE, "tools/call", work))["task"]["taskId"]
    err = await expect_error(call(engine, "tasks/result", taskId=tid), -32042, "upstream said no")
    assert err.data == {"retry": False}
    t = await call(engine, "tasks/get", taskId=tid)  # tasks/get itself succeeds (R-ERR-3)
    assert t["status"] == "failed" and t["statusMessage"] == "upstream said no"


async def test_unexpected_exception_is_internal_error_R_ERR_1(engine: TaskEngine) -> None:
    async def work(tc: TaskContext) -> dict[str, Any]:
        raise ZeroDivisionError("x")

    tid = (await create_task(engine, ALICE, "tools/call", work))["task"]["taskId"]
    await expect_error(call(engine, "tasks/result", taskId=tid), -32603)
    assert (await call(engine, "tasks/get", taskId=tid))["status"] == "failed"


async def test_terminal_status_never_changes_R_STATE_2_R_STATE_3(engine: TaskEngine) -> None:
    tid = (await create_task(engine, ALICE, "tools/call", instant))["task"]["taskId"]
    await call(engine, "tasks/result", taskId=tid)
    await expect_error(call(engine, "tasks/cancel", taskId=tid), -32602)
    assert (await call(engine, "tasks/get", taskId=tid))["status"] == "completed"


async def test_get_returns_whole_task_R_GET_3_R_TTL_1_R_TTL_4(engine: TaskEngine) -> None:
    tid = (await create_task(engine, ALICE, "tools/call", instant, task={"ttl": 5000}))["task"][
        "taskId"
    ]
    t = await call(engine, "tasks/get", taskId=tid)
    assert t["taskId"] == tid and t["ttl"] == 5000 and t["pollInterval"] == 500
    for key in ("createdAt", "lastUpdatedAt"):
        assert RFC3339.match(t[key]), t[key]
        datetime.fromisoformat(t[key].replace("Z", "+00:00"))


# ---------------------------------------------------------------- results: waiting


async def test_result_blocks_until_terminal_every_waiter_wakes_R_RESULT_2(
    engine: TaskEngine,
) -> None:
    ev, work = gate()
    tid = (await create_task(engine, ALICE, "tools/call", work))["task"]["taskId"]
    got: list[Any] = []

    async def waiter() -> None:
        got.append(await call(engine, "tasks/result", taskId=tid))

    async with anyio.create_task_group() as tg:
        for _ in range(10):
            tg.start_soon(waiter)
        await until_async(lambda: waiting_on(engine, tid) == 10, what="10 waiters wait")
        assert got == []  # still blocked
        ev.set()
    assert len(got) == 10 and all(g["content"][0]["text"] == "done" for g in got)


async def test_cancelled_waiters_are_cleaned_up_R_RESULT_2(engine: TaskEngine) -> None:
    ev, work = gate()
    tid = (await create_task(engine, ALICE, "tools/call", work))["task"]["taskId"]
    async with anyio.create_task_group() as tg:
        for _ in range(20):
            tg.start_soon(lambda: call(engine, "tasks/result", taskId=tid))
        # every one of them waits on the task's change signal, then goes away
        await until_async(lambda: waiting_on(engine, tid) == 20, what="20 waiters wait")
        tg.cancel_scope.cancel()
    # the waiters went away: nothing of theirs is left on the task's change signal
    assert waiting_on(engine, tid) == 0
    ev.set()
    await call(engine, "tasks/result", taskId=tid)
    await wound_down(engine)


# ---------------------------------------------------------------- cancelling


async def test_cancel_stops_work_and_is_cancelled_before_answer_R_CANCEL_2(
    engine: TaskEngine,
) -> None:
    started, stopped = anyio.Event(), anyio.Event()

    async def work(tc: TaskContext) -> dict[str, Any]:
        started.set()
        try:
            await anyio.sleep(60)  # a long work: the cancel stops it
        finally:
            stopped.set()
        return {}

    tid = (await create_task(engine, ALICE, "tools/call", work))["task"]["taskId"]
    with anyio.fail_after(30):
        await started.wait()
    answer = await call(engine, "tasks/cancel", taskId=tid)
    assert answer["status"] == "cancelled" and answer["taskId"] == tid
    assert (await call(engine, "tasks/get", taskId=tid))["status"] == "cancelled"
    with anyio.fail_after(30):
        await stopped.wait()
    await expect_error(call(engine, "tasks/result", taskId=tid), -32800)


async def test_cancel_terminal_is_invalid_params_R_CANCEL_1_R_ERR_2(engine: TaskEngine) -> None:
    tid = (await create_task(engine, ALICE, "tools/call", instant))["task"]["taskId"]
    await call(engine, "tasks/result", taskId=tid)
    ev, work = gate()
    tid2 = (await create_task(engine, ALICE, "tools/call", work))["task"]["taskId"]
    await call(engine, "tasks/cancel", taskId=tid2)
    for task_id, status in ((tid, "completed"), (tid2, "cancelled")):
        message = f"Cannot cancel task: already in terminal status '{status}'"
        await expect_error(call(engine, "tasks/cancel", taskId=task_id), -32602, message)


async def test_stays_cancelled_when_work_completes_anyway_R_CANCEL_3(engine: TaskEngine) -> None:
    release = anyio.Event()

    async def stubborn(tc: TaskContext) -> dict[str, Any]:
        with anyio.CancelScope(shield=True):  # ignores the cancel, then completes
            await release.wait()
        return {"content": [], "late": True}

    tid = (await create_task(engine, ALICE, "tools/call", stubborn))["task"]["taskId"]
    await call(engine, "tasks/cancel", taskId=tid)
    release.set()
    await wound_down(engine)
    t = await call(engine, "tasks/get", taskId=tid)
    assert t["status"] == "cancelled"
    await expect_error(call(engine, "tasks/result", taskId=tid), -32800)


async def test_cancelled_tasks_kept_until_ttl_R_CANCEL_4(engine: TaskEngine, clock: Clock) -> None:
    """R-CANCEL-4 is a MAY: this engine keeps cancelled tasks until their ttl, then deletes them."""
    ev, work = gate()
    tid = (await create_task(engine, ALICE, "tools/call", work, task={"ttl": 1000}))["task"][
        "taskId"
    ]
    await call(engine, "tasks/cancel", taskId=tid)
    assert (await call(engine, "tasks/get", taskId=tid))["status"] == "cancelled"
    clock.now += 2
    assert await engine.sweep() == 1
    await expect_error(call(engine, "tasks/get", taskId=tid), -32602, EXPIRED)


# ---------------------------------------------------------------- TTL


async def test_ttl_default_and_clamp_R_TTL_2_R_SEC_4(
    make_engine: Callable[..., TaskEngine],
) -> None:
    async with make_engine(default_ttl_ms=1000, max_ttl_ms=5000) as eng:
        for asked, actual in ((None, 1000), (3000, 3000), (10**15, 5000), (2**80, 5000), (0, 0)):
            task = None if asked is None else {"ttl": asked}
            created = await create_task(eng, ALICE, "tools/call", instant, task=task)
            assert created["task"]["ttl"] == actual
            got = await call(eng, "tasks/get", taskId=created["task"]["taskId"]) if actual else None
            assert got is None or got["ttl"] == actual
        # null asks for unlimited: refused (clamped) unless configured
        created = await create_task(eng, ALICE, "tools/call", instant, task={"ttl": None})
        assert created["task"]["ttl"] == 5000


async def test_ttl_null_only_when_configured_R_TTL_2(
    make_engine: Callable[..., TaskEngine],
) -> None:
    async with make_engine(allow_unlimited_ttl=True, default_ttl_ms=None) as eng:
        created = await create_task(eng, ALICE, "tools/call", instant, task={"ttl": None})
        assert created["task"]["ttl"] is None
        created = await create_task(eng, ALICE, "tools/call", instant)
        assert created["task"]["ttl"] is None
        t = await call(eng, "tasks/get", taskId=created["task"]["taskId"])
        assert t["ttl"] is None


async def test_expired_task_is_gone_R_TTL_3_R_ERR_2(engine: TaskEngine, clock: Clock) -> None:
    short = (await create_task(engine, ALICE, "tools/call", instant, task={"ttl": 1000}))["task"][
        "taskId"
    ]
    lazy = (await create_task(engine, ALICE, "tools/call", instant, task={"ttl": 1000}))["task"][
        "taskId"
    ]
    ev, work = gate()
    running = (await create_task(engine, ALICE, "tools/call", work, task={"ttl": 1000}))["task"][
        "taskId"
    ]
    keep = (await create_task(engine, ALICE, "tools/call", instant, task={"ttl": 100_000}))["task"][
        "taskId"
    ]
    await call(engine, "tasks/result", taskId=short)
    clock.now += 1.5
    # before any sweep: a lookup notices the expiry itself
    await expect_error(call(engine, "tasks/result", taskId=lazy), -32602, EXPIRED)
    assert await engine.sweep() == 1  # short; running is renewed, its work still runs
    for tid in (short, lazy):
        await expect_error(call(engine, "tasks/get", taskId=tid), -32602, EXPIRED)
        await expect_error(call(engine, "tasks/cancel", taskId=tid), -32602, EXPIRED)
        # other requestors get the plain "not found" (R-SEC-1)
        await expect_error(call(engine, "tasks/get", BOB, taskId=tid), -32602, NOT_FOUND)
    seen = await call(engine, "tasks/get", taskId=running)
    assert seen["status"] == "working" and seen["ttl"] > 1500  # the actual ttl (R-TTL-2)
    listed = await call(engine, "tasks/list")
    assert {t["taskId"] for t in listed["tasks"]} == {running, keep}
    ev.set()
    assert (await call(engine, "tasks/result", taskId=running))["content"][0]["text"] == "done"


async def test_ttl_from_creation_ends_work_when_configured_R_TTL_3(
    make_engine: Callable[..., TaskEngine], clock: Clock
) -> None:
    """``keep_running_tasks=False``: the ttl counts from creation whatever the status, and
    the work of a task that expires is stopped (R-TTL-3: "whatever its status")."""
    async with make_engine(keep_running_tasks=False) as eng:
        ev, work = gate()
        running = (await create_task(eng, ALICE, "tools/call", work, task={"ttl": 1000}))["task"][
            "taskId"
        ]
        clock.now += 1.5
        assert await eng.sweep() == 1
        await expect_error(call(eng, "tasks/get", taskId=running), -32602, EXPIRED)
        await wound_down(eng)
    await eng.store.close()


async def test_waiter_on_expiring_task_wakes_R_TTL_3(engine: TaskEngine, clock: Clock) -> None:
    """Work still running at the maximum ttl from creation is stopped and the task
    expires (renewals end there, R-SEC-4); a tasks/result waiting on it is answered."""
    ev, work = gate()
    tid = (await create_task(engine, ALICE, "tools/call", work, task={"ttl": 1000}))["task"][
        "taskId"
    ]
    errors: list[TaskError] = []

    async def waiter() -> None:
        try:
            await call(engine, "tasks/result", taskId=tid)
        except TaskError as exc:
            errors.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        await until_async(lambda: waiting_on(engine, tid) == 1, what="the waiter waits")
        clock.now += engine.config.max_ttl_ms / 1000 + 1
        await engine.sweep()
    assert [e.message for e in errors] == [EXPIRED]


# ---------------------------------------------------------------- starting, stopping


async def test_engine_not_started_and_shutdown_fails_running(
    make_engine: Callable[..., TaskEngine],
) -> None:
    eng = make_engine()
    await expect_error(create_task(eng, ALICE, "tools/call", instant), -32603)
    started, _release, work = started_gate()
    async with eng:
        tid = (await create_task(eng, ALICE, "tools/call", work))["task"]["taskId"]
        with anyio.fail_after(30):
            await started.wait()  # the engine stops while its work runs
    rec = await eng.store.get(tid)
    assert rec is not None and rec.status.value == "failed" and rec.status_message
