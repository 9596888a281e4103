"""Progress as a task's ``statusMessage`` (the extension face has no progress notifications
for tasks, X-NOTIF-7): ``TaskContext.report_progress`` writes at most once per
``progress_message_interval_s``, the first report at once and the latest one of a burst when
its interval ends; counted in store writes, never timed."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from mcp_tasks.errors import TaskError
from mcp_tasks.protocol import FAILED, TOOLS_CALL, TaskStatus
from mcp_tasks.runtime import EngineConfig, InMemoryTaskStore, TaskContext, TaskEngine
from mcp_tasks.runtime.engine.progress import progress_text
from mcp_tasks.store import TaskRecord

pytestmark = pytest.mark.anyio


class Counting(InMemoryTaskStore):
    """Counts the status writes (``transition``: every statusMessage write is one)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = {"transition": 0}
        self.inner = self

    async def transition(self, task_id: str, status: TaskStatus, **kw: Any) -> Any:
        self.calls["transition"] += 1
        return await super().transition(task_id, status, **kw)


def test_progress_text() -> None:
    assert progress_text(4, 10, "rendering") == "rendering (40%)"
    assert progress_text(4, 10) == "4 of 10 (40%)"
    assert progress_text(3, None, "step 3") == "step 3"
    assert progress_text(2.5) == "2.5"


def test_interval_is_checked() -> None:
    with pytest.raises(ValueError, match="progress_message_interval_s"):
        EngineConfig(progress_message_interval_s=0)


async def test_a_burst_of_progress_is_a_bounded_number_of_writes() -> None:
    store = Counting()
    burst_done, release = anyio.Event(), anyio.Event()
    config = EngineConfig(sweep_interval_s=3600, progress_message_interval_s=0.2)

    async def chatty(tc: TaskContext) -> dict[str, Any]:
        for i in range(1, 101):
            await tc.report_progress(i, 100, "copying")
        burst_done.set()
        await release.wait()
        return {"content": []}

    async with TaskEngine(store, config) as engine:
        rec = await engine.start("alice", "2025-11-25", TOOLS_CALL, chatty, tool_error=FAILED)
        await burst_done.wait()
        writes = store.calls["transition"]
        assert writes <= 2, writes  # the first report, not one per report
        first = await store.inner.get(rec.task_id)
        assert first is not None and first.status_message == "copying (1%)"
        with anyio.fail_after(10):  # the last report of the burst, when its interval ends
            while True:
                now = await store.inner.get(rec.task_id)
                assert now is not None
                if now.status_message == "copying (100%)":
                    break
                await anyio.sleep(0.02)
        assert store.calls["transition"] <= writes + 2
        release.set()


async def test_progress_of_an_ended_task_writes_nothing() -> None:
    store = Counting()

    async def quick(tc: TaskContext) -> dict[str, Any]:
        return {"content": []}

    async with TaskEngine(store, EngineConfig(sweep_interval_s=3600)) as engine:
        rec = await engine.start("alice", "2025-11-25", TOOLS_CALL, quick, tool_error=FAILED)
        with anyio.fail_after(5):
            while engine.running:
                await anyio.sleep(0.01)
        before = store.calls["transition"]
        await engine.runs.progress.note(rec.task_id, "late")
        assert store.calls["transition"] == before
        done: TaskRecord | None = await store.inner.get(rec.task_id)
        assert done is not None and done.status_message != "late"


async def test_a_failing_write_never_fails_the_work() -> None:
    class Broken(Counting):
        async def transition(self, task_id: str, status: Any, **kw: Any) -> Any:
            if (kw.get("status_message") or "").startswith("p"):
                raise TaskError("store down")
            return await super().transition(task_id, status, **kw)

    store = Broken()

    async def work(tc: TaskContext) -> dict[str, Any]:
        await tc.report_progress(1, 2, "p")
        return {"content": [{"type": "text", "text": "ok"}]}

    async with TaskEngine(store, EngineConfig(sweep_interval_s=3600)) as engine:
        rec = await engine.start("alice", "2025-11-25", TOOLS_CALL, work, tool_error=FAILED)
        with anyio.fail_after(5):
            while engine.running:
                await anyio.sleep(0.01)
        done = await store.inner.get(rec.task_id)
        assert done is not None and done.result == {"content": [{"type": "text", "text": "ok"}]}
