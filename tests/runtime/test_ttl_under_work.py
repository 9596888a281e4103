"""A ttl shorter than the work does not end the work: while its work runs here, a task's
ttl is renewed ahead of its expiry (the actual ttl reported, R-TTL-2, X-TTL-3); once the
work ends the task is kept for its ttl from then (R-TTL-3), within the maximum ttl from
creation, which still ends work that runs longer (R-SEC-4). On every store, both faces."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest

from mcp_tasks.core.meta import RELATED_TASK_KEY
from mcp_tasks.errors import TaskError
from mcp_tasks.runtime import (
    EngineConfig,
    InMemoryTaskStore,
    TaskContext,
    TaskEngine,
)
from mcp_tasks.store import TaskStore
from testkit.blinks import CORE, EXTENSION, Face, result_of
from testkit.engine_kit import engine_on
from testkit.redis_fixtures import RedisServer, unique_namespace
from testkit.wait import until_async

pytestmark = pytest.mark.anyio

EXPIRED = "Failed to retrieve task: Task has expired"
NOT_FOUND = "Failed to retrieve task: Task not found"
TTL_MS = 300
WORK_S = 1.2


async def slow(tc: TaskContext) -> dict[str, Any]:
    await anyio.sleep(WORK_S)  # the work's own duration, not a check
    return result_of(tc.task_id)


async def test_work_longer_than_its_ttl_completes_R_TTL_2_R_TTL_3(
    store_factory: Callable[[], TaskStore],
) -> None:
    """ttl 300 ms, work of 1.2 s: the task is not expired under its work; the client gets
    the result, and sees the actual ttl grow (the ttl it asked for in the CreateTaskResult);
    once terminal, the task is kept about its ttl longer, then expires."""
    cfg = {"sweep_interval_s": 0.05, "default_ttl_ms": TTL_MS}  # the extension asks no ttl
    async with engine_on(store_factory(), **cfg) as engine:
        core, ext = Face(engine, CORE), Face(engine, EXTENSION)
        created = await core.handler.dispatch_augmented(
            "tools/call", {"name": "job", "task": {"ttl": TTL_MS}}, core.ctx, work=slow
        )
        assert created["task"]["ttl"] == TTL_MS  # what was asked, granted (R-TTL-2)
        on_core = created["task"]["taskId"]
        on_ext = await ext.start(slow)
        with anyio.fail_after(60):
            answer = await core.result(on_core)  # R-RESULT-2: blocks until the end
        assert answer == {**result_of(on_core), "_meta": {RELATED_TASK_KEY: {"taskId": on_core}}}
        got = await ext.ended(on_ext)
        assert got["status"] == "completed" and got["result"] == result_of(on_ext)
        for face, tid, ttl_key in ((core, on_core, "ttl"), (ext, on_ext, "ttlMs")):
            try:
                seen = await face.get(tid)
            except TaskError as exc:  # kept for its ttl after the end: may be gone already
                assert exc.message == EXPIRED
                continue
            assert seen[ttl_key] > WORK_S * 1000  # the actual ttl, renewed (R-TTL-2)
        for face, tid in ((core, on_core), (ext, on_ext)):  # then it expires (R-TTL-3)
            await expired(face, tid)


async def expired(face: Face, task_id: str, *, elsewhere: bool = False) -> None:
    """Wait until ``tasks/get`` answers "Task has expired" (R-TTL-3); ``elsewhere``: another
    instance expired it, so this one may only know it as not found (X-GET-8)."""

    async def probe() -> str | None:
        try:
            await face.get(task_id)
        except TaskError as exc:
            return exc.message
        return None

    got = await until_async(probe, what=f"task {task_id} expires", interval=0.05)
    assert got == EXPIRED or (elsewhere and got == NOT_FOUND), got


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


async def test_max_ttl_still_ends_running_work_R_TTL_3_R_SEC_4() -> None:
    """The renewals stop at ``max_ttl_ms`` from creation: work still running then is
    stopped and the task expires, as before (R-SEC-4: a maximum ttl is enforced)."""
    clock = Clock()
    stopped = anyio.Event()

    async def forever(tc: TaskContext) -> dict[str, Any]:
        try:
            await anyio.sleep_forever()
        finally:
            stopped.set()
        return {}

    cfg = EngineConfig(max_ttl_ms=60_000, sweep_interval_s=3600)
    async with TaskEngine(InMemoryTaskStore(), cfg, clock=clock) as engine:
        core = Face(engine, CORE)
        tid = await core.start(forever, ttl=1000)
        clock.now += 2  # past its ttl: renewed, not expired
        await engine.sweep()
        seen = await core.get(tid)
        assert seen["status"] == "working" and seen["ttl"] > 2000
        clock.now += 60  # past the maximum ttl from creation
        await engine.sweep()
        with pytest.raises(TaskError) as err:
            await core.get(tid)
        assert err.value.message == EXPIRED
        with anyio.fail_after(10):
            await stopped.wait()


async def test_lookup_past_the_ttl_of_running_work_renews_it_R_TTL_2() -> None:
    """A ``tasks/get`` that comes before the sweep noticed finds the task, renewed."""
    clock = Clock()
    release = anyio.Event()

    async def held(tc: TaskContext) -> dict[str, Any]:
        await release.wait()
        return result_of(tc.task_id)

    async with TaskEngine(
        InMemoryTaskStore(), EngineConfig(sweep_interval_s=3600), clock=clock
    ) as engine:
        core = Face(engine, CORE)
        tid = await core.start(held, ttl=1000)
        clock.now += 5
        seen = await core.get(tid)
        assert seen["status"] == "working" and seen["ttl"] > 5000
        release.set()
        assert (await core.result(tid))["content"] == result_of(tid)["content"]


async def test_short_ttl_on_a_shared_store_outlives_another_instances_sweep_R_TTL_2(
    redis_server: RedisServer,
) -> None:
    """Two instances on one Redis; the one running the work sweeps once an hour, the other
    every 50 ms. A task with a 1 s ttl whose work runs longer is not expired by the other
    instance's sweep (it is renewed as its work starts), while a task of the same ttl whose
    work ended is (R-TTL-3); the long one then completes with its own result."""
    from mcp_tasks.runtime.stores.redis import RedisTaskStore

    ns = unique_namespace()
    sa, sb = (RedisTaskStore(redis_server.url, namespace=ns) for _ in "ab")
    release = anyio.Event()

    async def held(tc: TaskContext) -> dict[str, Any]:
        await release.wait()
        return result_of(tc.task_id)

    async def instant(tc: TaskContext) -> dict[str, Any]:
        return result_of(tc.task_id)

    try:
        async with (
            TaskEngine(sa, EngineConfig(sweep_interval_s=3600)) as a,
            TaskEngine(sb, EngineConfig(sweep_interval_s=0.05)),
        ):
            core = Face(a, CORE)
            long = await core.start(held, ttl=1000)
            control = await core.start(instant, ttl=1000)
            await core.ended(control)
            await expired(
                core, control, elsewhere=True
            )  # the other instance's sweep went past the ttl
            seen = await core.get(long)
            assert seen["status"] == "working" and seen["ttl"] > 1000  # renewed (R-TTL-2)
            release.set()
            await core.assert_completed_exactly(long)
    finally:
        await sa.close()
        await sb.close()
