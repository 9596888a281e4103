"""End to end: the example server (a real subprocess) driven by the ``mcp`` client and
our requestor helpers, over Streamable HTTP and stdio.

Every test runs on both transports through the ``connect`` fixture. Rule IDs refer
to ``docs/spec/tasks-2025-11-25.md``.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from mcp_tasks.core import models
from mcp_tasks.runtime.client.requestor import TaskNotSupported, raw_request
from testkit.mcp_e2e import CONFIRM_OUTCOMES, assert_tasks_contract, run_confirm_delete, text_of
from testkit.wait import until_async

pytestmark = pytest.mark.anyio

WAIT = 60  # seconds; generous for loaded machines, never a timing assertion


async def test_capabilities_and_task_support(connect: Any) -> None:
    # R-CAP-1, R-CAP-2: tasks {list, cancel, requests.tools.call}; taskSupport per tool
    async with connect() as s:
        assert "tools" in await assert_tasks_contract(s, fixtures=True)


async def test_greet_plain_and_task_support_misuse(connect: Any) -> None:
    async with connect() as s:
        assert text_of(await s.call_tool("greet", {"name": "Ada"})) == "Hello, Ada!"
        # R-TOOL-2: a forbidden tool called as a task -> -32601 (JSON-RPC error, not isError)
        with pytest.raises(MCPError) as forbidden:
            await s.tasks.call_tool_as_task("greet", {"name": "Ada"}, check=False)
        assert forbidden.value.code == -32601
        # the helper refuses before sending (R-TOOL-2 on the requestor side)
        with pytest.raises(TaskNotSupported):
            await s.tasks.call_tool_as_task("greet", {"name": "Ada"})
        # R-TOOL-4: a required tool called without a task -> -32601
        for name in ("failing_job", "protocol_error_job"):
            with pytest.raises(MCPError) as required:
                await s.call_tool(name, {})
            assert required.value.code == -32601
        # R-TOOL-3: optional tools also run without a task
        direct = await s.call_tool("slow_compute", {"seconds": 0, "label": "direct"})
        assert text_of(direct) == "done after 0s (direct)"


async def test_completed_with_progress_and_status_notifications(connect: Any) -> None:
    progress: list[types.ProgressNotificationParams] = []
    created_at_count: list[int] = []
    completed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ProgressNotification):
            progress.append(message.params)

    async def on_status(task: dict[str, Any]) -> None:
        if task["status"] == "completed":
            completed.set()

    async with connect(message_handler=on_message, on_task_status=on_status) as s:
        created = await s.tasks.call_tool_as_task(
            "slow_compute", {"seconds": 1, "label": "L"}, progress_token="tok-1"
        )
        # R-CREATE-2, R-STATE-1: CreateTaskResult with a working task; R-TTL-1 timestamps
        assert created.task.status == models.TaskStatus.working
        assert created.task.createdAt and created.task.lastUpdatedAt
        created_at_count.append(len(progress))
        seen: list[str] = []
        task = await s.tasks.wait(
            created.task.taskId, on_status=lambda t: seen.append(t.status.value)
        )
        assert task.status == models.TaskStatus.completed
        assert seen[-1] == "completed"
        result = await s.tasks.tool_result(task.taskId)
        assert text_of(result) == "done after 1s (L)"
        # R-RESULT-4: related-task _meta on the tasks/result response
        assert result.meta is not None
        assert result.meta["io.modelcontextprotocol/related-task"] == {"taskId": task.taskId}
        # R-PROGRESS-1: progress for the original token arrives after CreateTaskResult
        await until_async(lambda: len(progress) > created_at_count[0], WAIT, what="progress")
        assert all(p.progress_token == "tok-1" for p in progress)
        # R-NOTIFY-1: the status notification carries the whole Task, no related-task _meta
        with anyio.fail_after(WAIT):
            await completed.wait()
        note = next(t for t in s.task_statuses if t["taskId"] == task.taskId)
        assert {"taskId", "status", "createdAt", "lastUpdatedAt", "ttl"} <= set(note)
        assert "_meta" not in note  # R-NOTIFY-3
        # R-GET-3: tasks/get returns the whole Task; seconds 0 completes at once
        quick = await s.tasks.run_tool("slow_compute", {"seconds": 0})
        assert text_of(quick) == "done after 0s (no label)"


async def test_failed_both_kinds(connect: Any) -> None:
    async with connect() as s:
        # R-STATE-4: CallToolResult isError -> failed, statusMessage diagnostic
        created = await s.tasks.call_tool_as_task("failing_job", {})
        task = await s.tasks.wait(created.task.taskId)
        assert task.status == models.TaskStatus.failed
        assert task.statusMessage
        result = await s.tasks.tool_result(task.taskId)
        assert result.is_error is True and text_of(result) == "job failed"
        # R-STATE-4, R-RESULT-1: a JSON-RPC error -> failed, tasks/result answers that error
        created = await s.tasks.call_tool_as_task("protocol_error_job", {})
        task = await s.tasks.wait(created.task.taskId)
        assert task.status == models.TaskStatus.failed
        with pytest.raises(MCPError) as err:
            await s.tasks.result(task.taskId)
        assert err.value.code == -32603
        assert "protocol_error_job" in err.value.message
        # R-ERR-3: tasks/get itself is no protocol error
        assert (await s.tasks.get(task.taskId)).status == models.TaskStatus.failed


async def test_cancelled(connect: Any) -> None:
    async with connect() as s:
        created = await s.tasks.call_tool_as_task("slow_compute", {"seconds": 120})
        tid = created.task.taskId
        # R-CANCEL-2: cancelled before the response; the work stops
        cancelled = await s.tasks.cancel(tid)
        assert cancelled.status == models.TaskStatus.cancelled
        assert (await s.tasks.get(tid)).status == models.TaskStatus.cancelled  # R-CANCEL-3
        # R-CANCEL-1: cancelling a terminal task -> -32602
        with pytest.raises(MCPError) as again:
            await s.tasks.cancel(tid)
        assert again.value.code == -32602
        # R-LIST-3: the task is listed for its requestor
        assert tid in {t.taskId for t in await s.tasks.list_all()}


@pytest.mark.parametrize(("action", "expected"), CONFIRM_OUTCOMES)
async def test_input_required(connect: Any, action: str, expected: str) -> None:
    run = await run_confirm_delete(connect, action)
    assert text_of(run.result) == f"{expected} /tmp/x"
    # R-INPUT-1: the task was input_required while waiting; R-INPUT-3: the helper
    # switched to tasks/result and the request arrived there
    assert "input_required" in run.statuses
    assert run.statuses[-1] == "completed"  # R-INPUT-4: back to working, then done
    # R-INPUT-2: the elicitation carried the task's related-task _meta
    assert len(run.asked) == 1
    tid = run.asked[0]["io.modelcontextprotocol/related-task"]["taskId"]
    assert run.result.meta is not None
    assert run.result.meta["io.modelcontextprotocol/related-task"]["taskId"] == tid


async def test_invalid_params_name_the_field(connect: Any) -> None:
    async with connect() as s:
        cases: list[tuple[str, dict[str, Any], str]] = [
            ("tasks/get", {}, "taskId"),
            ("tasks/get", {"taskId": 5}, "taskId"),
            ("tasks/result", {}, "taskId"),
            ("tasks/cancel", {"taskId": None}, "taskId"),
            ("tasks/list", {"cursor": 7}, "cursor"),
            ("tools/call", {"arguments": {}}, "name"),
            ("tools/call", {"name": "slow_compute", "task": {"ttl": "soon"}}, "task.ttl"),
        ]
        for method, params, field in cases:
            with pytest.raises(MCPError) as err:
                await raw_request(s, method, params)
            # -32602 naming the field, never -32603 or a traceback
            assert err.value.code == -32602, (method, params, err.value)
            assert field in err.value.message, (method, params, err.value.message)
            assert "Traceback" not in err.value.message
        # R-ERR-1, R-ERR-2: unknown taskId -> -32602 "Task not found"
        with pytest.raises(MCPError) as missing:
            await s.tasks.get("no-such-task")
        assert missing.value.code == -32602
        assert "not found" in missing.value.message.lower()


async def test_input_fixture_tools(connect: Any) -> None:
    """The conformance suite's fixture tools on the 2025-11-25 face: ``confirm_delete`` takes
    ``filename`` too; ``multi_input`` has two elicitations outstanding at once; the required
    ``test_tool_with_task`` asks for the user's name inside its task (R-INPUT-1)."""
    asked: list[str] = []

    async def on_elicit(ctx: Any, params: Any) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Ada", "confirm": True})

    async with connect(elicitation_callback=on_elicit) as s:
        result = await s.tasks.run_tool("confirm_delete", {"filename": "rt.txt"})
        assert text_of(result) == "deleted rt.txt"
        result = await s.tasks.run_tool("multi_input", {})
        assert text_of(result) == "answers: Ada accept, Ada accept"
        result = await s.tasks.run_tool("test_tool_with_task", {})
        assert text_of(result) == "Hello, Ada!"
        assert len(asked) == 4
