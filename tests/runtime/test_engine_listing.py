"""TaskEngine against every store: tasks/list pages and cursors, errors and bad input, and
the requestor limits and isolation; each test names the receiver rule it checks.

The engine fixtures (``engine``, ``make_engine``, ``store_factory``: memory, SQLite, Redis;
``clock``) come from ``testkit.engine_kit`` through the runtime tests' conftest."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from mcp_tasks.core.meta import RELATED_TASK_KEY
from mcp_tasks.errors import ConcurrencyLimitExceeded, RateLimitExceeded
from mcp_tasks.runtime import InMemoryTaskStore, TaskEngine
from testkit.core_calls import create_task, handle
from testkit.engine_kit import ALICE, BOB, NOT_FOUND, Clock, call, expect_error, gate, instant

pytestmark = pytest.mark.anyio


# ---------------------------------------------------------------- listing


async def test_list_pages_cursor_R_LIST_1_R_LIST_2_R_LIST_3(
    make_engine: Callable[..., TaskEngine], clock: Clock
) -> None:
    async with make_engine(page_size=4, max_active_per_requestor=1000) as eng:
        ids = []
        for _i in range(10):
            clock.now += 0.001
            ids.append((await create_task(eng, ALICE, "tools/call", instant))["task"]["taskId"])
        await create_task(eng, BOB, "tools/call", instant)
        seen: list[str] = []
        cursor = None
        pages = 0
        while True:
            params = {} if cursor is None else {"cursor": cursor}
            page = await call(eng, "tasks/list", **params)
            pages += 1
            assert len(page["tasks"]) <= 4
            seen += [t["taskId"] for t in page["tasks"]]
            cursor = page.get("nextCursor")
            if cursor is None:
                break
            assert isinstance(cursor, str) and not any(tid in cursor for tid in ids)
        assert seen == ids and pages == 3
        # every task retrievable by tasks/get is in tasks/list
        for tid in ids:
            await call(eng, "tasks/get", taskId=tid)


async def test_cursor_valid_after_its_task_deleted_R_LIST_1(
    make_engine: Callable[..., TaskEngine], clock: Clock
) -> None:
    async with make_engine(page_size=2) as eng:
        ids = []
        for i in range(5):
            clock.now += 0.001
            ttl = 1000 if i == 1 else 100_000
            ids.append(
                (await create_task(eng, ALICE, "tools/call", instant, task={"ttl": ttl}))["task"][
                    "taskId"
                ]
            )
        page = await call(eng, "tasks/list")
        assert [t["taskId"] for t in page["tasks"]] == ids[:2]
        while eng.running:  # the works ended (a running task's ttl is renewed instead)
            await anyio.sleep(0)
        clock.now += 2
        assert await eng.sweep() == 1  # the task the cursor points at is gone
        page2 = await call(eng, "tasks/list", cursor=page["nextCursor"])
        assert [t["taskId"] for t in page2["tasks"]] == ids[2:4]


async def test_bad_cursor_invalid_params_R_ERR_1_R_LIST_2(
    engine: TaskEngine, make_engine: Callable[..., TaskEngine]
) -> None:
    for _i in range(3):
        await create_task(engine, ALICE, "tools/call", instant)
    engine.config.page_size = 1
    cursor = (await call(engine, "tasks/list"))["nextCursor"]
    body, mac = cursor.split(".")
    tampered = body[:-2] + ("AA" if body[-2:] != "AA" else "BB") + "." + mac
    for bad in (tampered, "garbage", "", "a.b", cursor + "x", "€.€"):
        err = await expect_error(call(engine, "tasks/list", cursor=bad), -32602)
        assert "cursor" in err.message
    # issued to alice, presented by bob (foreign): refused
    await expect_error(call(engine, "tasks/list", BOB, cursor=cursor), -32602)
    # issued by another engine with another key: refused
    other = make_engine(cursor_secret=b"another key")
    await expect_error(other.list_page(ALICE.requestor, cursor), -32602)
    await expect_error(call(engine, "tasks/list", cursor=123), -32602)


# ---------------------------------------------------------------- errors, bad input


async def test_unknown_task_invalid_params_R_ERR_1_R_ERR_2(engine: TaskEngine) -> None:
    for method in ("tasks/get", "tasks/result", "tasks/cancel"):
        await expect_error(call(engine, method, taskId="nope"), -32602, NOT_FOUND)


async def test_malformed_params_name_the_field_R_ERR_1(engine: TaskEngine) -> None:
    for method in ("tasks/get", "tasks/result", "tasks/cancel"):
        for params in ({}, {"taskId": 5}, {"taskId": None}, {"taskId": ["x"]}):
            err = await expect_error(handle(engine, method, params, ALICE), -32602)
            assert "taskId" in err.message
        err = await expect_error(handle(engine, method, ["x"], ALICE), -32602)  # type: ignore[arg-type]
    for bad in (-1, "10", 1.5, True, [1], {"x": 1}, float("nan")):
        err = await expect_error(
            create_task(engine, ALICE, "tools/call", instant, task={"ttl": bad}), -32602
        )
        assert "params.task.ttl" in err.message
    await expect_error(create_task(engine, ALICE, "tools/call", instant, task="x"), -32602)  # type: ignore[arg-type]
    await expect_error(handle(engine, "tasks/nope", {}, ALICE), -32601)


async def test_meta_in_params_ignored_R_META_2(engine: TaskEngine) -> None:
    tid = (await create_task(engine, ALICE, "tools/call", instant))["task"]["taskId"]
    params = {"taskId": tid, "_meta": {RELATED_TASK_KEY: {"taskId": "other"}}}
    assert (await handle(engine, "tasks/get", params, ALICE))["taskId"] == tid


async def test_store_failure_is_internal_error_R_ERR_1(engine: TaskEngine) -> None:
    class Broken(InMemoryTaskStore):
        async def get(self, task_id: str) -> Any:
            raise OSError("disk")

    engine.store = Broken()
    await expect_error(call(engine, "tasks/get", taskId="x"), -32603)


# ---------------------------------------------------------------- security


async def test_other_requestor_sees_not_found_R_SEC_1(engine: TaskEngine) -> None:
    ev, work = gate()
    tid = (await create_task(engine, ALICE, "tools/call", work))["task"]["taskId"]
    for method in ("tasks/get", "tasks/result", "tasks/cancel"):
        await expect_error(call(engine, method, BOB, taskId=tid), -32602, NOT_FOUND)
    assert (await call(engine, "tasks/list", BOB))["tasks"] == []
    assert (await call(engine, "tasks/get", taskId=tid))["status"] == "working"
    ev.set()


async def test_concurrency_limit_R_SEC_4(make_engine: Callable[..., TaskEngine]) -> None:
    async with make_engine(max_active_per_requestor=3) as eng:
        ev, work = gate()
        tids = [
            (await create_task(eng, ALICE, "tools/call", work))["task"]["taskId"] for _ in range(3)
        ]
        err = await expect_error(create_task(eng, ALICE, "tools/call", work), -32000)
        assert isinstance(err, ConcurrencyLimitExceeded) and "3" in err.message
        await create_task(eng, BOB, "tools/call", work)  # others are not affected
        await call(eng, "tasks/cancel", taskId=tids[0])
        await create_task(eng, ALICE, "tools/call", work)  # a slot freed
        ev.set()


async def test_concurrency_limit_holds_under_concurrent_creates_R_SEC_4(
    make_engine: Callable[..., TaskEngine],
) -> None:
    async with make_engine(max_active_per_requestor=5) as eng:
        ev, work = gate()
        ok: list[str] = []

        async def create() -> None:
            try:
                ok.append((await create_task(eng, ALICE, "tools/call", work))["task"]["taskId"])
            except ConcurrencyLimitExceeded:
                pass

        async with anyio.create_task_group() as tg:
            for _ in range(20):
                tg.start_soon(create)
        assert len(ok) == 5
        ev.set()


async def test_rate_limit_R_SEC_3(make_engine: Callable[..., TaskEngine]) -> None:
    async with make_engine(rate_limit_calls=5, rate_limit_window_s=60) as eng:
        for _ in range(5):
            await expect_error(call(eng, "tasks/get", taskId="x"), -32602)
        err = await expect_error(call(eng, "tasks/get", taskId="x"), -32000)
        assert isinstance(err, RateLimitExceeded)
        await expect_error(call(eng, "tasks/list"), -32000)
        await call(eng, "tasks/list", BOB)  # per requestor


async def test_a_creation_counts_toward_the_rate_limit_R_SEC_3(
    make_engine: Callable[..., TaskEngine],
) -> None:
    """Creating a task is a task operation: creations alone exhaust the rate limit."""
    async with make_engine(rate_limit_calls=3, rate_limit_window_s=60) as eng:
        for _ in range(3):
            await create_task(eng, ALICE, "tools/call", instant)
        err = await expect_error(create_task(eng, ALICE, "tools/call", instant), -32000)
        assert isinstance(err, RateLimitExceeded)
        await create_task(eng, BOB, "tools/call", instant)  # per requestor


async def test_audit_events_with_requestor_R_SEC_5(
    engine: TaskEngine, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="mcp_tasks.audit")
    tid = (await create_task(engine, ALICE, "tools/call", instant))["task"]["taskId"]
    await call(engine, "tasks/result", taskId=tid)
    await call(engine, "tasks/get", taskId=tid)
    await expect_error(call(engine, "tasks/get", BOB, taskId=tid), -32602)
    ev, work = gate()
    tid2 = (await create_task(engine, ALICE, "tools/call", work))["task"]["taskId"]
    await call(engine, "tasks/cancel", taskId=tid2)
    events = [
        (r.audit_event, r.requestor, r.task_id)
        for r in caplog.records
        if r.name == "mcp_tasks.audit"
    ]  # type: ignore[attr-defined]
    for expected in (
        ("created", "alice", tid),
        ("status_changed", "alice", tid),
        ("result_retrieved", "alice", tid),
        ("retrieved", "alice", tid),
        ("lookup_rejected", "bob", tid),
        ("cancel_requested", "alice", tid2),
    ):
        assert expected in events, (expected, events)
