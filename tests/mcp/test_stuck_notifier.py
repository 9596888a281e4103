"""A status listener that never returns (a custom notifier, a stalled stream) holds back no
result: a held ``tasks/result`` (2025-11-25) and the extension's polled ``tasks/get`` with
its inlined result (2026-07-28) answer when the task ends, and the operators' views (the
metrics, the dashboard's feed) see the end, while the listener is still stuck.

The server runs in memory (``memory_client``), so the test can add its listener to the
engine and read the operators' views."""

from __future__ import annotations

import anyio
import pytest
from mcp.server.mcpserver import MCPServer

from mcp_tasks.protocol import COMPLETED, TASK_SUPPORT_REQUIRED
from mcp_tasks.runtime.ops.feed import TaskFeed
from mcp_tasks.runtime.ops.metrics import TaskMetrics
from mcp_tasks.runtime.serve.server import McpTasks
from mcp_tasks.store import TaskRecord
from mcp_tasks.testing.memory import memory_client
from testkit.mcp_e2e import text_of

pytestmark = [pytest.mark.anyio, pytest.mark.door_agnostic]  # no HTTP: no door

FACES = ["2025-11-25", "2026-07-28"]


@pytest.mark.parametrize("face", FACES)
async def test_a_stuck_status_listener_holds_back_no_result_R_RESULT_2_X_GET_9(
    face: str,
) -> None:
    """R-RESULT-2 (tasks/result answers once terminal), X-GET-9 (the result inlined in
    tasks/get), R-NOTIFY-2 (a notification is informational: nothing waits on it)."""
    release = anyio.Event()
    mcp = MCPServer("stuck")
    tasks = McpTasks(mcp)

    @tasks.tool(task_support=TASK_SUPPORT_REQUIRED)
    @mcp.tool()
    async def gated() -> str:
        await release.wait()
        return "done"

    stuck = anyio.Event()  # never set while the test runs
    entered = anyio.Event()

    async def stuck_listener(rec: TaskRecord) -> None:
        if rec.status == COMPLETED:
            entered.set()
        await stuck.wait()  # blocks every notification from the first one on

    tasks.engine.on_status.append(stuck_listener)
    metrics = TaskMetrics()
    metrics.attach_server(tasks)
    feed = TaskFeed(tasks.engine)
    got: dict[str, str] = {}
    try:
        async with memory_client(tasks, face=face) as session, feed.subscribe() as sub:
            async with anyio.create_task_group() as tg:

                async def run() -> None:
                    got["text"] = text_of(await session.tasks.run_tool("gated", {}))

                tg.start_soon(run)
                with anyio.fail_after(10):
                    while tasks.engine.running == 0:  # the task exists, its tool waits
                        await anyio.sleep(0.01)
                    await anyio.wait_all_tasks_blocked()
                release.set()
            assert got["text"] == "done"
            assert not stuck.is_set()  # the listener is stuck still
            ended = {key[2]: n for key, n in metrics.ended.items()}
            assert ended == {COMPLETED.value: 1}, metrics.ended
            seen = [(e["kind"], e.get("task", {}).get("status")) for e in sub.queue]
            assert ("created", "working") in seen and ("status", COMPLETED.value) in seen, seen
            with anyio.fail_after(10):
                await entered.wait()  # the listener was told of the end too, after the result
    finally:
        stuck.set()
        feed.close()
        metrics.close()
