"""TaskEngine against both stores: each test names the receiver rule it checks."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_tasks.errors import (
    ConcurrencyLimitExceeded,
    JsonRpcError,
    RateLimitExceeded,
    TaskError,
)
from mcp_tasks.handlers import RequestContext
from mcp_tasks.meta import RELATED_TASK_KEY
from mcp_tasks.protocol import FAILED
from mcp_tasks.runtime import (
    CoreTasks,
    EngineConfig,
    InMemoryTaskStore,
    SqliteTaskStore,
    TaskContext,
    TaskEngine,
)
from mcp_tasks.store import TaskRecord, TaskStore
from testkit.core_calls import Asked, create_task, handle
from testkit.wait import until_async

pytestmark = pytest.mark.anyio

ALICE = RequestContext(requestor="alice", progress_token="tok-1")
BOB = RequestContext(requestor="bob")
NOT_FOUND = "Failed to retrieve task: Task not found"
EXPIRED = "Failed to retrieve task: Task has expired"
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["memory", "sqlite", "redis"])
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], TaskStore]:
    if request.param == "memory":
        return InMemoryTaskStore
    if request.param == "redis":  # a shared store: testkit.redis_fixtures starts redis-server
        from mcp_tasks.runtime.redis import RedisTaskStore
        from testkit.redis_fixtures import unique_namespace

        url, ns = request.getfixturevalue("redis_server").url, unique_namespace()
        return lambda: RedisTaskStore(url, namespace=ns)
    return lambda: SqliteTaskStore(tmp_path / "tasks.db")


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def make_engine(store_factory: Callable[[], TaskStore], clock: Clock) -> Callable[..., TaskEngine]:
    def make(**kw: Any) -> TaskEngine:
        hooks = {k: kw.pop(k) for k in ("on_status",) if k in kw}
        kw.setdefault("sweep_interval_s", 3600)
        return TaskEngine(store_factory(), EngineConfig(**kw), clock=clock, **hooks)

    return make


@pytest.fixture
async def engine(make_engine: Callable[..., TaskEngine]) -> AsyncIterator[TaskEngine]:
    async with make_engine() as eng:
        yield eng
    await eng.store.close()


def gate() -> tuple[anyio.Event, Callable[[TaskContext], Any]]:
    """A work that waits for the test to release it, then returns a fixed result."""
    ev = anyio.Event()

    async def work(tc: TaskContext) -> dict[str, Any]:
        await ev.wait()
        return {"content": [{"type": "text", "text": "done"}], "isError": False}

    return ev, work


async def instant(tc: TaskContext) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": "ok"}]}


async def call(eng: TaskEngine, method: str, ctx: RequestContext = ALICE, **params: Any) -> Any:
    return await handle(eng, method, params, ctx)


async def wait_status(
    eng: TaskEngine, tid: str, status: str, ctx: RequestContext = ALICE
) -> dict[str, Any]:
    task: dict[str, Any] = await until_async(
        lambda: call(eng, "tasks/get", ctx, taskId=tid),
        satisfied=lambda t: t["status"] == status,
        what=f"task {tid} {status}",
    )
    return task


async def wound_down(eng: TaskEngine) -> None:
    """Every run of ``eng`` ended (a shared store may wake a waiter a moment before)."""
    await until_async(lambda: not eng.running, what="every run wound down")


def waiting_on(eng: TaskEngine, tid: str) -> int:
    """How many ``tasks/result`` calls wait on the signal of ``tid``'s run."""
    return len(eng.runs.active[tid].changed._event._waiters)  # type: ignore[attr-defined]


def started_gate() -> tuple[anyio.Event, anyio.Event, Callable[[TaskContext], Any]]:
    """A work that says it started (``started``), then waits for the test to release it."""
    started, release = anyio.Event(), anyio.Event()

    async def work(tc: TaskContext) -> dict[str, Any]:
        started.set()
        await release.wait()
        return {"content": [{"type": "text", "text": "done"}], "isError": False}

    return started, release, work


async def expect_error(coro: Any, code: int, message: str | None = None) -> TaskError:
    with pytest.raises(TaskError) as info:
        await coro
    assert info.value.code == code, info.value.message
    if message is not None:
        assert info.value.message == message
    return info.value


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
    assert await engine.sweep() == 2  # short + running
    for tid in (short, lazy, running):
        await expect_error(call(engine, "tasks/get", taskId=tid), -32602, EXPIRED)
        await expect_error(call(engine, "tasks/cancel", taskId=tid), -32602, EXPIRED)
        # other requestors get the plain "not found" (R-SEC-1)
        await expect_error(call(engine, "tasks/get", BOB, taskId=tid), -32602, NOT_FOUND)
    listed = await call(engine, "tasks/list")
    assert [t["taskId"] for t in listed["tasks"]] == [keep]
    await wound_down(engine)


async def test_waiter_on_expiring_task_wakes_R_TTL_3(engine: TaskEngine, clock: Clock) -> None:
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
        clock.now += 2
        await engine.sweep()
    assert [e.message for e in errors] == [EXPIRED]


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


async def list_pages(eng: TaskEngine) -> list[list[str]]:
    """Every ``tasks/list`` page of alice's, following ``nextCursor``: the task IDs of each."""
    pages: list[list[str]] = []
    cursor = None
    while True:
        page = await call(eng, "tasks/list", **({} if cursor is None else {"cursor": cursor}))
        pages.append([t["taskId"] for t in page["tasks"]])
        cursor = page.get("nextCursor")
        if cursor is None:
            return pages


def full_until_last(pages: list[list[str]], size: int) -> bool:
    return all(len(p) == size for p in pages[:-1]) and 0 < len(pages[-1]) <= size


async def test_list_pages_full_beside_another_faces_tasks_R_LIST_1(
    make_engine: Callable[..., TaskEngine], clock: Clock
) -> None:
    """A requestor who also has tasks of the other face: every 2025-11-25 page is full
    until the last and lists each of its tasks once (the face is the store query's
    filter, not a filter after a read of one page)."""
    async with make_engine(page_size=3, max_active_per_requestor=1000) as eng:
        core = []
        for i in range(8):
            for _ in range(5 if i % 3 == 0 else 1):  # runs longer than a page, and short ones
                clock.now += 0.001
                await eng.start("alice", "another-face", "tools/call", instant, tool_error=FAILED)
            clock.now += 0.001
            core.append((await create_task(eng, ALICE, "tools/call", instant))["task"]["taskId"])
        pages = await list_pages(eng)
        assert full_until_last(pages, 3), pages
        assert [tid for page in pages for tid in page] == core


async def test_list_pages_full_past_expired_unswept_tasks_R_LIST_1_R_TTL_3(
    make_engine: Callable[..., TaskEngine], clock: Clock
) -> None:
    """Tasks past their ttl that no sweep removed yet are left out of the listing without
    leaving its pages short: the engine reads on until the page is full."""
    async with make_engine(page_size=3, max_active_per_requestor=1000) as eng:
        live = []
        for i in range(12):
            clock.now += 0.001
            ttl = 1000 if i % 3 else 100_000  # two of every three expire
            created = await create_task(eng, ALICE, "tools/call", instant, task={"ttl": ttl})
            if ttl > 1000:
                live.append(created["task"]["taskId"])
        clock.now += 2
        pages = await list_pages(eng)
        assert full_until_last(pages, 3), pages
        assert [tid for page in pages for tid in page] == live


async def test_list_cursor_continues_where_reading_stopped_R_LIST_1_R_TTL_3(
    make_engine: Callable[..., TaskEngine], clock: Clock
) -> None:
    """A long run of expired, unswept tasks costs a page a bounded number of reads: the
    page then ends where the reading stopped (shorter, with a cursor), and the next one
    goes on from there; every live task is listed once."""
    async with make_engine(page_size=1, max_active_per_requestor=1000) as eng:
        live = []
        for i in range(40):
            clock.now += 0.001
            ttl = 100_000 if i in (0, 39) else 1000
            created = await create_task(eng, ALICE, "tools/call", instant, task={"ttl": ttl})
            if ttl > 1000:
                live.append(created["task"]["taskId"])
        clock.now += 2
        pages = await list_pages(eng)
        assert len(pages) > 2 and [] in pages
        assert [tid for page in pages for tid in page] == live


class FacelessStore(InMemoryTaskStore):
    """A store written before listings took a ``face``: it lists every face."""

    async def list_tasks(  # type: ignore[override]
        self, requestor: str, *, after: tuple[float, str] | None, limit: int
    ) -> list[TaskRecord]:
        return await super().list_tasks(requestor, after=after, limit=limit)


async def test_a_store_without_the_face_filter_still_lists_full_pages_R_LIST_1(
    clock: Clock,
) -> None:
    async with TaskEngine(FacelessStore(), EngineConfig(page_size=2), clock=clock) as eng:
        core = []
        for _ in range(3):
            for _ in range(2):
                clock.now += 0.001
                await eng.start("alice", "another-face", "tools/call", instant, tool_error=FAILED)
            clock.now += 0.001
            core.append((await create_task(eng, ALICE, "tools/call", instant))["task"]["taskId"])
        pages = await list_pages(eng)
        assert full_until_last(pages, 2), pages
        assert [tid for page in pages for tid in page] == core


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
        tg.start_soon(lambda: handle(engine, "tasks/result", {"taskId": tid}, ALICE, on_input=never))
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
