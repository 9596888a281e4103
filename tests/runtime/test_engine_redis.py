"""Two TaskEngines sharing one Redis: wake-ups, cancel, input hand-over and outages
across instances (in one process; tests/runtime/test_redis_e2e.py uses two servers)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from mcp_tasks.core.handlers import RequestContext
from mcp_tasks.errors import JsonRpcError, RequestCancelled, TaskError
from mcp_tasks.runtime import EngineConfig, TaskContext, TaskEngine
from mcp_tasks.runtime.stores.redis import RedisTaskStore
from testkit.core_calls import Asked, create_task, handle
from testkit.redis_fixtures import RedisServer, unique_namespace
from testkit.wait import until_async

pytestmark = pytest.mark.anyio

ALICE = RequestContext(requestor="alice")


@asynccontextmanager
async def two_engines(url: str, **store_kw: Any) -> AsyncIterator[tuple[TaskEngine, TaskEngine]]:
    ns = unique_namespace()
    sa = RedisTaskStore(url, namespace=ns, **store_kw)
    sb = RedisTaskStore(url, namespace=ns, **store_kw)
    cfg = EngineConfig(cursor_secret=b"shared-secret", sweep_interval_s=0.2)
    try:
        async with TaskEngine(sa, cfg) as a, TaskEngine(sb, cfg) as b:
            yield a, b
    finally:
        await sa.close()
        await sb.close()


async def test_result_on_b_wakes_when_a_finishes(redis_url: str) -> None:
    release = anyio.Event()

    async def work(tc: TaskContext) -> dict[str, Any]:
        await release.wait()
        return {"content": [{"type": "text", "text": "done"}], "isError": False}

    async with two_engines(redis_url) as (a, b):
        created = await create_task(a, ALICE, "tools/call", work, task={"ttl": 60_000})
        tid = created["task"]["taskId"]
        got = await handle(b, "tasks/get", {"taskId": tid}, ALICE)
        assert got["status"] == "working"
        out: dict[str, Any] = {}

        async def wait_result() -> None:
            out.update(await handle(b, "tasks/result", {"taskId": tid}, ALICE))

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(wait_result)
                # B's tasks/result watches the task (its wake-up comes through Redis)
                await until_async(lambda: b.store.events.watchers.get(tid), what="B waits")
                release.set()
        assert out["content"] == [{"type": "text", "text": "done"}]
        assert out["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": tid}
        # listing with a cursor issued by A works on B (same cursor secret)
        listed = await handle(b, "tasks/list", {}, ALICE)
        assert [t["taskId"] for t in listed["tasks"]] == [tid]


async def test_cancel_on_b_stops_work_on_a(redis_url: str) -> None:
    started, stopped = anyio.Event(), anyio.Event()

    async def work(tc: TaskContext) -> dict[str, Any]:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            stopped.set()
        return {}

    async with two_engines(redis_url) as (a, b):
        tid = (await create_task(a, ALICE, "tools/call", work))["task"]["taskId"]
        with anyio.fail_after(60):
            await started.wait()
            cancelled = await handle(b, "tasks/cancel", {"taskId": tid}, ALICE)
            assert cancelled["status"] == "cancelled"
            await stopped.wait()  # R-CANCEL-2 across instances
        await until_async(lambda: not a.running, what="A's run ended")
        got = await handle(a, "tasks/get", {"taskId": tid}, ALICE)
        assert got["status"] == "cancelled"  # the late end of the work changed nothing
        with pytest.raises(RequestCancelled) as ei:
            await handle(a, "tasks/result", {"taskId": tid}, ALICE)
        assert ei.value.code == -32800


async def test_input_required_delivered_by_other_instance(redis_url: str) -> None:
    async def work(tc: TaskContext) -> dict[str, Any]:
        answer = await tc.request_input(
            "elicitation/create", {"message": "Delete?", "requestedSchema": {"type": "object"}}
        )
        return {"content": [{"type": "text", "text": answer["action"]}], "isError": False}

    seen: list[Asked] = []

    async def on_input(p: Asked) -> dict[str, Any]:
        seen.append(p)
        return {"action": "accept", "content": {}}

    async with two_engines(redis_url) as (a, b):
        tid = (await create_task(a, ALICE, "tools/call", work))["task"]["taskId"]
        with anyio.fail_after(60):
            out = await handle(b, "tasks/result", {"taskId": tid}, ALICE, on_input=on_input)
        assert out["content"] == [{"type": "text", "text": "accept"}]
        assert len(seen) == 1 and seen[0].method == "elicitation/create"
        assert seen[0].params["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": tid}
        assert (await handle(a, "tasks/get", {"taskId": tid}, ALICE))["status"] == "completed"


async def test_input_error_answer_reaches_work(redis_url: str) -> None:
    async def work(tc: TaskContext) -> dict[str, Any]:
        try:
            await tc.request_input("sampling/createMessage", {"messages": [], "maxTokens": 5})
        except TaskError as exc:
            return {"content": [{"type": "text", "text": f"refused {exc.code}"}]}
        return {"content": []}

    async def on_input(p: Asked) -> dict[str, Any]:
        raise JsonRpcError(-1, "User rejected sampling request")

    async with two_engines(redis_url) as (a, b):
        tid = (await create_task(a, ALICE, "tools/call", work))["task"]["taskId"]
        with anyio.fail_after(60):
            out = await handle(b, "tasks/result", {"taskId": tid}, ALICE, on_input=on_input)
        assert out["content"] == [{"type": "text", "text": "refused -1"}]


async def test_abandoned_delivery_is_offered_again(redis_url: str) -> None:
    async def work(tc: TaskContext) -> dict[str, Any]:
        answer = await tc.request_input("elicitation/create", {"message": "?"})
        return {"content": [{"type": "text", "text": str(answer["n"])}]}

    delivered = anyio.Event()

    async def never(p: Asked) -> dict[str, Any]:  # takes the input request, never answers
        delivered.set()
        await anyio.sleep_forever()
        return {}

    async def answer(p: Asked) -> dict[str, Any]:
        return {"n": 7}

    async with two_engines(redis_url) as (a, b):
        tid = (await create_task(a, ALICE, "tools/call", work))["task"]["taskId"]
        async with anyio.create_task_group() as tg:  # this tasks/result goes away mid-delivery
            tg.start_soon(lambda: handle(b, "tasks/result", {"taskId": tid}, ALICE, on_input=never))
            with anyio.fail_after(60):
                await delivered.wait()
            tg.cancel_scope.cancel()
        with anyio.fail_after(60):
            out = await handle(a, "tasks/result", {"taskId": tid}, ALICE, on_input=answer)
        assert out["content"] == [{"type": "text", "text": "7"}]


async def test_store_outage_is_clear_error_and_recovers(
    fresh_redis_server: RedisServer,
) -> None:
    async def work(tc: TaskContext) -> dict[str, Any]:
        return {"content": []}

    async with two_engines(fresh_redis_server.url) as (a, b):
        tid = (await create_task(a, ALICE, "tools/call", work))["task"]["taskId"]
        fresh_redis_server.stop()
        for method, params in (
            ("tasks/get", {"taskId": tid}),
            ("tasks/list", {}),
            ("tasks/result", {"taskId": tid}),
            ("tasks/cancel", {"taskId": tid}),
        ):
            with anyio.fail_after(60), pytest.raises(TaskError) as ei:
                await handle(b, method, params, ALICE)
            err = ei.value.to_error()
            assert err["code"] == -32603
            assert err["message"] == "Task store unavailable"
            assert "127.0.0.1" not in err["message"]  # the address is for the server log
        with pytest.raises(TaskError) as ei:
            await create_task(a, ALICE, "tools/call", work)
        assert ei.value.code == -32603
        fresh_redis_server.start()
        with anyio.fail_after(60):
            tid2 = (await create_task(a, ALICE, "tools/call", work))["task"]["taskId"]
            out = await handle(b, "tasks/result", {"taskId": tid2}, ALICE)
        assert out["content"] == []


async def test_list_cursor_from_a_accepted_by_b_without_configured_secret(
    redis_url: str,
) -> None:
    """No cursor_secret configured: the engines share one through the store."""

    async def work(tc: TaskContext) -> dict[str, Any]:
        return {"content": []}

    ns = unique_namespace()
    sa = RedisTaskStore(redis_url, namespace=ns)
    sb = RedisTaskStore(redis_url, namespace=ns)
    cfg = EngineConfig(page_size=1)
    try:
        async with TaskEngine(sa, cfg) as a, TaskEngine(sb, cfg) as b:
            ids = [
                (await create_task(a, ALICE, "tools/call", work))["task"]["taskId"] for _ in "xyz"
            ]
            seen: list[str] = []
            page = await handle(a, "tasks/list", {}, ALICE)
            engines = [b, a]
            while True:
                seen += [t["taskId"] for t in page["tasks"]]
                if "nextCursor" not in page:
                    break
                engines.reverse()  # alternate instances page by page
                page = await handle(engines[0], "tasks/list", {"cursor": page["nextCursor"]}, ALICE)
            assert sorted(seen) == sorted(ids)
    finally:
        await sa.close()
        await sb.close()


async def test_cursors_agree_again_after_redis_lost_its_data_R_LIST_2(
    fresh_redis_server: RedisServer,
) -> None:
    """No cursor_secret configured. Redis restarts without persistence and one instance
    restarts: each instance's tasks/list cursors are accepted by the other, with no
    restart of the instance that stayed up (it adopts the secret Redis now holds)."""

    async def work(tc: TaskContext) -> dict[str, Any]:
        return {"content": []}

    ns = unique_namespace()
    url = fresh_redis_server.url
    cfg = EngineConfig(page_size=1, sweep_interval_s=0.2)
    sa = RedisTaskStore(url, namespace=ns, lease_s=0.3)
    stores = [sa]
    try:
        async with TaskEngine(sa, cfg) as a:
            fresh_redis_server.stop()
            with pytest.raises(TaskError):  # A notices the outage
                await handle(a, "tasks/list", {}, ALICE)
            fresh_redis_server.start()
            sb = RedisTaskStore(url, namespace=ns, lease_s=0.3)  # instance B (re)starts
            stores.append(sb)
            async with TaskEngine(sb, cfg) as b:
                for _ in "xy":
                    await create_task(b, ALICE, "tools/call", work)
                for first, second in ((b, a), (a, b)):

                    async def cursor_accepted(first: Any = first, second: Any = second) -> bool:
                        page = await handle(first, "tasks/list", {}, ALICE)
                        await handle(second, "tasks/list", {"cursor": page["nextCursor"]}, ALICE)
                        return True

                    await until_async(  # TaskError: not adopted yet, the heartbeat re-reads it
                        cursor_accepted,
                        ignoring=(TaskError,),
                        interval=0.1,
                        what="the other instance accepts the cursor",
                    )
    finally:
        for s in stores:
            await s.close()
