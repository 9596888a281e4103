"""``TaskMetrics`` and ``OpsApp`` in-process: what each series counts, bounded labels,
readiness against a failing store, the app mounted under a prefix, and a store that
cannot list across requestors."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from mcp_tasks.errors import RateLimitExceeded, TaskError
from mcp_tasks.protocol import FAILED, TOOLS_CALL
from mcp_tasks.runtime import EngineConfig, InMemoryTaskStore, TaskContext, TaskEngine
from mcp_tasks.runtime.faces.core import FACE
from mcp_tasks.runtime.ops.app import OpsApp
from mcp_tasks.runtime.ops.metrics import OTHER, TaskMetrics
from mcp_tasks.runtime.stores.redis import RedisTaskStore
from mcp_tasks.store import TaskRecord, TaskStore
from mcp_tasks.testing.admin_conformance import tool_record
from testkit.redis_fixtures import unique_namespace
from testkit.wait import until_async

pytestmark = pytest.mark.anyio
TOKEN = "metrics-token-0123456789"
ADMIN = "admin-token-0123456789ab"


def samples(metrics: TaskMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(metrics.render().decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(metrics: TaskMetrics, name: str, **labels: str) -> float:
    return samples(metrics).get((name, tuple(sorted(labels.items()))), 0.0)


async def test_counts_tasks_by_face_tool_and_status() -> None:
    metrics = TaskMetrics()
    asked = anyio.Event()
    answer = anyio.Event()

    async def asks(tc: TaskContext) -> dict[str, Any]:
        asked.set()
        await tc.request_input("elicitation/create", {"message": "ok?"})
        await answer.wait()
        return {"content": [], "isError": True}

    async def quick(tc: TaskContext) -> dict[str, Any]:
        return {"content": []}

    try:
        async with TaskEngine(config=EngineConfig(rate_limit_calls=4)) as engine:
            metrics.attach(engine, tools={"report", "asks"})
            await engine.start("alice", FACE, TOOLS_CALL, quick, tool_error=FAILED, tool="report")
            await engine.start("bob", FACE, TOOLS_CALL, quick, tool_error=FAILED, tool="secret-x")
            rec = await engine.start("bob", FACE, TOOLS_CALL, asks, tool_error=FAILED, tool="asks")
            await asked.wait()
            await until_async(
                lambda: value(metrics, "mcp_tasks_active", status="input_required") >= 1,
                what="the task counted as waiting for input",
            )
            view = await engine.view("bob", rec.task_id, face=FACE)
            await engine.answer("bob", rec.task_id, {}, face=FACE)  # nothing: a no-op
            key = view.inputs[0].key
            with pytest.raises(
                RateLimitExceeded
            ):  # the fifth task call of bob in the window, creations included (R-SEC-3)
                await engine.answer("bob", rec.task_id, {key: {}}, face=FACE)
            engine.rate = type(engine.rate)(100, 10)
            await engine.answer("bob", rec.task_id, {key: {}}, face=FACE)
            answer.set()
            await until_async(
                lambda: (
                    value(metrics, "mcp_tasks_ended_total", face=FACE, tool="asks", status="failed")
                    >= 1
                ),
                what="the asking task counted as failed",
            )
        got = samples(metrics)
        assert value(metrics, "mcp_tasks_created_total", face=FACE, tool="report") == 1
        # an undeclared tool collapses into one label value
        assert value(metrics, "mcp_tasks_created_total", face=FACE, tool=OTHER) == 1
        assert not any("secret-x" in str(k) for k in got)
        assert (
            value(metrics, "mcp_tasks_ended_total", face=FACE, tool="report", status="completed")
            == 1
        )
        assert (
            value(
                metrics, "mcp_tasks_duration_seconds_count", face=FACE, tool="asks", status="failed"
            )
            == 1
        )
        assert value(metrics, "mcp_tasks_input_required_seconds_count", face=FACE, tool="asks") == 1
        assert value(metrics, "mcp_tasks_refused_total", limit="rate") == 1
        assert value(metrics, "mcp_tasks_active", status="working") == 0
    finally:
        metrics.close()
    before = samples(metrics)
    async with TaskEngine() as engine:  # closed: nothing more is counted
        await engine.start("alice", FACE, TOOLS_CALL, quick, tool_error=FAILED, tool="report")
    assert samples(metrics) == before


async def test_counts_expiry_and_the_active_limit_R_SEC_4() -> None:
    """A task removed at its ttl (R-TTL-3) and a creation refused by the active-task limit
    (R-SEC-4) are each counted once."""
    metrics = TaskMetrics()
    now = [1_000.0]
    hold = anyio.Event()

    async def quick(tc: TaskContext) -> dict[str, Any]:
        return {"content": []}

    async def held(tc: TaskContext) -> dict[str, Any]:
        await hold.wait()
        return {"content": []}

    config = EngineConfig(max_active_per_requestor=1)
    try:
        async with TaskEngine(config=config, clock=lambda: now[0]) as engine:
            metrics.attach(engine, tools={"report"})
            done = await engine.start(
                "alice", FACE, TOOLS_CALL, quick, tool_error=FAILED, tool="report", ttl_ms=1000
            )
            await engine.wait_terminal("alice", done.task_id, face=FACE)
            await engine.start("bob", FACE, TOOLS_CALL, held, tool_error=FAILED, tool="report")
            with pytest.raises(TaskError):
                await engine.start("bob", FACE, TOOLS_CALL, held, tool_error=FAILED, tool="report")
            now[0] += 2
            assert await engine.sweep() == 1
            hold.set()
        assert value(metrics, "mcp_tasks_expired_total", face=FACE) == 1
        assert value(metrics, "mcp_tasks_refused_total", limit="active") == 1
        assert value(metrics, "mcp_tasks_created_total", face=FACE, tool="report") == 2
    finally:
        metrics.close()


def test_counts_dropped_notifications_of_a_server() -> None:
    """``attach_server`` reads the server's dropped status notifications: a connection slower
    than its tasks end keeps NOTIFY_BACKLOG waiting and drops the rest (R-NOTIFY-2)."""
    from mcp.server.mcpserver import MCPServer

    from mcp_tasks.runtime.serve.server import McpTasks
    from mcp_tasks.runtime.serve.sessions import NOTIFY_BACKLOG

    class SlowConnection:
        session_id = "s-1"
        state: dict[str, Any] = {}

        async def notify(self, method: str, params: Any, opts: Any = None) -> None:
            await anyio.sleep(0.2)  # slower than the tasks end: the behaviour under test

    async def main() -> None:
        tasks = McpTasks(MCPServer("t"), task_support={"report": "optional"})
        metrics = TaskMetrics()
        metrics.attach_server(tasks)
        try:
            conn = SlowConnection()  # held here: the sessions keep connections weakly
            tasks.sessions.bind("session:s-1", conn)  # type: ignore[arg-type]
            async with anyio.create_task_group() as tg:
                for i in range(20):
                    rec = tool_record(str(i), "session:s-1")
                    tg.start_soon(tasks.sessions.on_status, rec)
            dropped = value(metrics, "mcp_tasks_notifications_dropped_total")
            assert dropped == 20 - NOTIFY_BACKLOG
        finally:
            metrics.close()

    anyio.run(main)


async def test_counts_store_retries_on_redis(redis_url: str) -> None:
    """Lua scripts Redis lost (``SCRIPT FLUSH``) are loaded again and a connection Redis
    closed is made again: each is one store retry (``what``: ``script``, ``reconnect``)."""
    import redis.asyncio as aioredis

    store = RedisTaskStore(redis_url, namespace=unique_namespace())
    other = aioredis.Redis.from_url(redis_url)
    metrics = TaskMetrics()
    try:
        await store.create(tool_record("t1"))
        assert (await store.get("t1")) is not None  # its script loaded
        await other.script_flush()
        assert (await store.get("t1")) is not None
        assert value(metrics, "mcp_tasks_store_retries_total", what="script") == 1
        await other.client_kill_filter(_type="normal", skipme=True)
        assert (await store.get("t1")) is not None
        assert value(metrics, "mcp_tasks_store_retries_total", what="reconnect") >= 1
        assert value(metrics, "mcp_tasks_store_errors_total") == 0  # retried, not failed
    finally:
        metrics.close()
        await other.aclose()
        await store.close()


class Down(InMemoryTaskStore):
    async def get(self, task_id: str) -> TaskRecord | None:
        raise ConnectionError("the store is down")


def _client(app: Any, base: str = "http://ops") -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base)


async def test_readiness_and_store_errors() -> None:
    engine = TaskEngine(Down())
    app = OpsApp(engine, metrics_token=TOKEN)
    try:
        async with _client(app) as client:
            assert (await client.get("/healthz")).json() == {"status": "ok"}
            ready = await client.get("/readyz")
            assert ready.status_code == 503 and ready.json()["status"] == "unavailable"
            scrape = await client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
            assert "mcp_tasks_store_errors_total 1.0" in scrape.text
    finally:
        app.close()
    ok = OpsApp(TaskEngine())
    async with _client(ok) as client:
        assert (await client.get("/readyz")).json() == {"status": "ready", "store": "ok"}
        assert (await client.get("/metrics")).status_code == 404  # no metrics token: off
    ok.close()


async def test_mounted_under_a_prefix_and_a_store_without_listing() -> None:
    from starlette.applications import Starlette
    from starlette.routing import Mount

    class NoListing(InMemoryTaskStore):
        list_all = TaskStore.list_all  # the default: refuses

    async with TaskEngine(NoListing()) as engine:
        app = OpsApp(engine, admin_token=ADMIN)
        site = Starlette(routes=[Mount("/ops", app=app)])
        auth = {"Authorization": f"Bearer {ADMIN}"}
        try:
            async with _client(site) as client:
                page = await client.get("/ops/admin/")
                assert page.status_code == 200 and "app.js" in page.text
                assert (await client.get("/ops/admin/app.js")).status_code == 200
                listing = await client.get("/ops/admin/api/tasks", headers=auth)
                assert listing.status_code == 501 and "cannot list" in listing.json()["error"]
                bad = await client.get("/ops/admin/api/tasks?status=nope", headers=auth)
                assert bad.status_code == 400
                gone = await client.get("/ops/admin/api/tasks/nope", headers=auth)
                assert gone.status_code == 404
                assert (await client.get("/ops/admin/api/tasks", headers={})).status_code == 401
        finally:
            app.close()


def test_short_or_equal_tokens_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 16"):
        OpsApp(TaskEngine(), admin_token="short")
    with pytest.raises(ValueError, match="differ"):
        OpsApp(TaskEngine(), admin_token=ADMIN, metrics_token=ADMIN)
