"""``TaskMetrics`` and ``OpsApp`` in-process: what each series counts, bounded labels,
readiness against a failing store, the app mounted under a prefix, and a store that
cannot list across requestors."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from mcp_tasks.errors import RateLimitExceeded
from mcp_tasks.protocol import FAILED, TOOLS_CALL
from mcp_tasks.runtime import EngineConfig, InMemoryTaskStore, TaskContext, TaskEngine
from mcp_tasks.runtime.core import FACE
from mcp_tasks.runtime.ops.app import OpsApp
from mcp_tasks.runtime.ops.metrics import OTHER, TaskMetrics
from mcp_tasks.store import TaskRecord, TaskStore

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
        async with TaskEngine(config=EngineConfig(rate_limit_calls=2)) as engine:
            metrics.attach(engine, tools={"report", "asks"})
            await engine.start("alice", FACE, TOOLS_CALL, quick, tool_error=FAILED, tool="report")
            await engine.start("bob", FACE, TOOLS_CALL, quick, tool_error=FAILED, tool="secret-x")
            rec = await engine.start("bob", FACE, TOOLS_CALL, asks, tool_error=FAILED, tool="asks")
            await asked.wait()
            with anyio.fail_after(30):
                while value(metrics, "mcp_tasks_active", status="input_required") < 1:
                    await anyio.sleep(0.01)
            view = await engine.view("bob", rec.task_id, face=FACE)
            await engine.answer("bob", rec.task_id, {}, face=FACE)  # nothing: a no-op
            key = view.inputs[0].key
            with pytest.raises(RateLimitExceeded):  # the third call in the window (R-SEC-3)
                await engine.answer("bob", rec.task_id, {key: {}}, face=FACE)
            engine.rate = type(engine.rate)(100, 10)
            await engine.answer("bob", rec.task_id, {key: {}}, face=FACE)
            answer.set()
            with anyio.fail_after(30):
                while (
                    value(metrics, "mcp_tasks_ended_total", face=FACE, tool="asks", status="failed")
                    < 1
                ):
                    await anyio.sleep(0.01)
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
