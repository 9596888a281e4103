"""Our client -> TypeScript SDK 1.32.2 server.

``ts_server.mjs`` has the example server's tool contract, built on the SDK's experimental
tasks (``InMemoryTaskStore``, ``registerToolTask``). Our requestor helpers
(``TaskRequestor`` through ``TasksClientSession``) and the ``mcptask`` CLI drive it over
Streamable HTTP and stdio. Where the TS SDK departs from the spec, the test says so in one
line and checks the spec's behaviour on our side only.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from mcp_tasks.core import models
from mcp_tasks.runtime.client.requestor import TaskNotSupported, TasksClientSession, raw_request
from testkit.interop import (
    CONFIRM_OUTCOMES,
    INTEROP_DIR,
    TsServer,
    assert_tasks_contract,
    http_session,
    node_env,
    node_path,
    run_confirm_delete,
    stdio_command_session,
    text_of,
)
from testkit.procs import running
from testkit.wait import until_async

pytestmark = [pytest.mark.usefixtures("node_modules"), pytest.mark.anyio]

RELATED = "io.modelcontextprotocol/related-task"
WAIT = 60  # seconds; generous, never a timing assertion


@pytest.fixture(scope="module")
def ts_http(tmp_path_factory: pytest.TempPathFactory, node_modules: None) -> Iterator[TsServer]:
    with running(TsServer(Path(tmp_path_factory.mktemp("ts-server")))) as server:
        yield server


def ts_stdio(**kwargs: Any) -> AbstractAsyncContextManager[TasksClientSession]:
    script = [str(INTEROP_DIR / "ts_server.mjs"), "--stdio"]
    return stdio_command_session(str(node_path()), script, node_env(), **kwargs)


@pytest.fixture(params=["http", "stdio"])
def connect(request: pytest.FixtureRequest) -> Any:
    if request.param == "http":
        server: TsServer = request.getfixturevalue("ts_http")
        return lambda **kw: http_session(server.url, **kw)
    return lambda **kw: ts_stdio(**kw)


async def test_capabilities_and_task_support(connect: Any) -> None:
    async with connect() as s:
        await assert_tasks_contract(s)  # R-CAP-1, R-CAP-2
        assert text_of(await s.call_tool("greet", {"name": "Ada"})) == "Hello, Ada!"
        # R-TOOL-2 on our side: the helper refuses to task-augment a forbidden tool
        with pytest.raises(TaskNotSupported):
            await s.tasks.call_tool_as_task("greet", {"name": "Ada"})
        # TS SDK departure (R-TOOL-2 SHOULD -32601): a task-augmented call of a forbidden tool
        # fails its own CreateTaskResult check and answers -32602 "Invalid task creation result".
        with pytest.raises(MCPError) as forbidden:
            await raw_request(
                s, "tools/call", {"name": "greet", "arguments": {"name": "Ada"}, "task": {}}
            )
        assert forbidden.value.code == -32602
        # TS SDK departure (R-TOOL-4 MUST -32601): a required tool called without a task gets
        # an isError CallToolResult; our helper calls required tools as tasks (R-TOOL-4).
        plain = await s.call_tool("failing_job", {})
        assert plain.is_error and "-32601" in text_of(plain)
        via_helper = await s.tasks.call_tool("failing_job", {})
        assert via_helper.is_error and text_of(via_helper) == "job failed"


async def test_slow_compute_with_progress(connect: Any) -> None:
    progress: list[types.ProgressNotificationParams] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ProgressNotification):
            progress.append(message.params)

    async with connect(message_handler=on_message) as s:
        created = await s.tasks.call_tool_as_task(
            "slow_compute", {"seconds": 1, "label": "py"}, ttl=60000, progress_token="p-1"
        )
        # R-CREATE-2, R-STATE-1, R-TTL-1, R-TTL-2, R-TTL-4
        assert created.task.status == models.TaskStatus.working
        assert created.task.createdAt and created.task.lastUpdatedAt
        assert created.task.ttl == 60000 and created.task.pollInterval == 200
        seen: list[str] = []
        task = await s.tasks.wait(
            created.task.taskId, on_status=lambda t: seen.append(t.status.value)
        )
        assert task.status == models.TaskStatus.completed and seen[-1] == "completed"
        result = await s.tasks.tool_result(task.taskId)
        assert text_of(result) == "done after 1s (py)"
        assert result.meta is not None and result.meta[RELATED] == {"taskId": task.taskId}
        # R-LIST-3
        assert task.taskId in {t.taskId for t in await s.tasks.list_all()}
        # R-PROGRESS-1: progress for the original token after CreateTaskResult
        await until_async(lambda: progress, WAIT, what="progress for p-1")
        assert all(p.progress_token == "p-1" for p in progress)
        # R-TOOL-3: an optional tool also runs without a task
        assert (
            text_of(await s.call_tool("slow_compute", {"seconds": 0})) == "done after 0s (no label)"
        )


async def test_cancel(connect: Any) -> None:
    async with connect() as s:
        created = await s.tasks.call_tool_as_task("slow_compute", {"seconds": 60})
        tid = created.task.taskId
        assert (await s.tasks.cancel(tid)).status == models.TaskStatus.cancelled  # R-CANCEL-2
        assert (await s.tasks.get(tid)).status == models.TaskStatus.cancelled  # R-CANCEL-3
        with pytest.raises(MCPError) as again:
            await s.tasks.cancel(tid)
        assert again.value.code == -32602  # R-CANCEL-1
        assert tid in {t.taskId for t in await s.tasks.list_all()}
        with pytest.raises(MCPError) as missing:
            await s.tasks.get("no-such-task")
        assert missing.value.code == -32602  # R-ERR-1


async def test_failed_both_kinds(connect: Any) -> None:
    async with connect() as s:
        # R-STATE-4, R-RESULT-1: isError result -> failed; tasks/result returns it
        result = await s.tasks.run_tool("failing_job", {})
        assert result.is_error is True and text_of(result) == "job failed"
        created = await s.tasks.call_tool_as_task("failing_job", {})
        assert (await s.tasks.wait(created.task.taskId)).status == models.TaskStatus.failed
        # A JSON-RPC error from the work: tasks/result answers that error (R-RESULT-1).
        # TS SDK departure: its TaskStore stores only Results, so ts_server.mjs adds the replay.
        with pytest.raises(MCPError) as err:
            await s.tasks.run_tool("protocol_error_job", {})
        assert err.value.code == -32603 and "protocol_error_job" in err.value.message


@pytest.mark.parametrize(("action", "expected"), CONFIRM_OUTCOMES)
async def test_confirm_delete_elicitation(connect: Any, action: str, expected: str) -> None:
    run = await run_confirm_delete(connect, action)
    assert text_of(run.result) == f"{expected} /tmp/x"
    # R-INPUT-1, R-INPUT-3: the helper saw input_required and fetched tasks/result, where
    # the elicitation arrived carrying the task's related-task _meta (R-INPUT-2)
    assert "input_required" in run.statuses and run.statuses[-1] == "completed"
    assert len(run.asked) == 1
    assert run.result.meta is not None
    assert run.asked[0][RELATED] == run.result.meta[RELATED]


def mcptask(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcp_tasks.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env=node_env(),
    )


def test_cli_against_ts_server(ts_http: TsServer) -> None:
    stdio = f"{node_path()} {INTEROP_DIR / 'ts_server.mjs'} --stdio"
    for target in (ts_http.url, stdio):
        ok = mcptask("call", target, "slow_compute", "seconds=0.3", "label=cli", "--task")
        assert ok.returncode == 0, ok.stderr
        assert ok.stdout.strip() == "done after 0.3s (cli)"
        assert "completed" in ok.stderr  # the live status line followed the task (R-GET-1)
    failed = mcptask("call", ts_http.url, "failing_job", "--task")
    assert failed.returncode == 1 and failed.stdout.strip() == "job failed"
    crashed = mcptask("call", ts_http.url, "protocol_error_job", "--task")
    assert crashed.returncode == 1 and "-32603" in crashed.stderr
    refused = mcptask("call", ts_http.url, "greet", "name=x", "--task")
    assert refused.returncode == 2  # R-TOOL-2 on our side
    listed = mcptask("tasks", "list", ts_http.url)
    assert listed.returncode == 0, listed.stderr
