"""Our client side of the 2026-07-28 tasks extension (``mcp_tasks.runtime.client.extension``)
against two servers of that revision: our example server and FastMCP 4 (``fastmcp-tasks``
4.1.4, a peer we did not write, in its own virtualenv: skipped without a package registry,
a failure under ``CI``).

- the stock ``mcp`` 2.3 ``Client(url)`` in its default mode plus our
  ``TasksClientExtension`` gets tasks (X-CAP-1, X-CAP-6);
- our ``TaskRequestor`` picks the extension's face from the negotiated revision;
- ``mcptask`` runs ``call --task`` and ``tasks get|cancel|result`` there.

Where FastMCP departs from the SEP (its server, as far as our client sees it): input inside
a task is its "guard pattern" (the tool re-runs with the answers), which our client cannot
tell from any other ``inputRequests``; it sends no ``notifications/tasks`` (X-NOTIF-1 is a
MAY), so our client must get everything by polling; it suggests ``pollIntervalMs`` 5000.
Its *client* sends no ``Mcp-Name`` and turns a failed task into ``isError``: the FastMCP
client's own test (``test_interop_fastmcp.py``) checks our server tolerates the first; our
client raises the task's JSON-RPC error instead (X-ERR-3), as the SEP asks.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client import ClientRequestContext
from mcp.shared.exceptions import MCPError

from mcp_tasks.errors import MissingRequiredClientCapability, RequestCancelled
from mcp_tasks.extension import protocol as ext
from mcp_tasks.runtime.client.extension import ExtTaskRequestor, TasksClientExtension
from mcp_tasks.runtime.client.requestor import TaskNotSupported, TaskRequestor
from testkit.doors import door_of, http_targets
from testkit.interop import SERVER_MODULE, FastMcpServer, HttpServer, interrupt_cli_task, node_env
from testkit.ops import mcptask

pytestmark = pytest.mark.anyio

#: tool -> (arguments, is_error, text) on both servers (the example server's tool contract)
CONTRACT: dict[str, tuple[dict[str, Any], bool, str]] = {
    "greet": ({"name": "Ada"}, False, "Hello, Ada!"),
    "slow_compute": ({"seconds": 0.2, "label": "x"}, False, "done after 0.2s (x)"),
    "confirm_delete": ({"filename": "a.txt"}, False, "deleted a.txt"),
    "multi_input": ({}, False, "answers: Ada accept, Ada accept"),
    "failing_job": ({}, True, "job failed"),
    "test_tool_with_task": ({}, False, "Hello, Ada!"),
}


@pytest.fixture(scope="module")
def fastmcp_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = FastMcpServer(tmp_path_factory.mktemp("fastmcp"))
    try:
        yield server.start().url
    finally:
        server.stop()


@pytest.fixture(params=http_targets("fastmcp"))
def url(request: pytest.FixtureRequest) -> str:
    """Our example server (through each front door) or FastMCP's."""
    door = door_of(request.param)
    if door is not None:
        server: HttpServer = request.getfixturevalue("http_server_pool").get(door)
        ours: str = server.url
        return ours
    got: str = request.getfixturevalue("fastmcp_url")
    return got


async def on_elicit(
    context: ClientRequestContext, params: types.ElicitRequestParams
) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"confirm": True, "name": "Ada"})


def text_of(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def test_stock_client_with_our_extension_gets_tasks(
    url: str, request: pytest.FixtureRequest
) -> None:
    fastmcp = request.node.callspec.params["url"] == "fastmcp"
    seen: list[Any] = []
    extension = TasksClientExtension(on_status=seen.append)
    async with Client(url, extensions=[extension], elicitation_callback=on_elicit) as c:
        assert c.session.protocol_version == ext.REVISION  # the stock client's default mode
        caps = c.session.server_capabilities
        assert caps is not None and ext.EXTENSION_ID in (caps.extensions or {})  # X-CAP-2
        for tool, (arguments, is_error, text) in CONTRACT.items():
            seen.clear()
            result = await c.call_tool(tool, arguments)
            assert (result.is_error, text_of(result)) == (is_error, text), tool
            if tool != "greet":  # X-CAP-4: a task, polled to its end (X-GET-2)
                assert seen and seen[-1].status == ext.COMPLETED, (tool, seen)
        # X-UPD-3: input requests went to the stock client's elicitation callback
        # X-ERR-3: a JSON-RPC error inside the task is a failed task, raised as that error
        with pytest.raises(MCPError) as failed:
            await c.call_tool("protocol_error_job", {})
        assert failed.value.code == types.INTERNAL_ERROR
        # the raw handle: the claimed CreateTaskResult, then tasks/cancel (X-CAN-3, X-CAN-5)
        raw = await c.session.call_tool("slow_compute", {"seconds": 30}, allow_claimed=True)
        created = ext.CreateTaskResult.model_validate(raw.model_dump(by_alias=True))
        assert created.resultType == ext.RESULT_TYPE_TASK and created.ttlMs != 0
        requestor = extension.requestor(c.session)
        ack = await requestor.cancel(created.taskId)
        assert ack.resultType == ext.RESULT_TYPE_COMPLETE
        assert (await requestor.wait(created.taskId)).status == ext.CANCELLED
        if not fastmcp:  # X-NOTIF-2: the task's notifications on subscriptions/listen
            assert extension.wakeups.notices
        else:  # FastMCP sends none: polling alone (X-NOTIF-1 is a MAY)
            assert not extension.wakeups.notices
    async with Client(url) as plain:  # no extension: no task (X-CAP-5) ...
        result = await plain.call_tool("slow_compute", {"seconds": 0})
        assert not result.is_error
        with pytest.raises(MCPError) as refused:  # ... and a required tool refuses (X-CAP-8)
            await plain.call_tool("failing_job", {})
        assert refused.value.code == MissingRequiredClientCapability.code


async def test_task_requestor_on_the_extension_face(url: str) -> None:
    async with Client(url, elicitation_callback=on_elicit) as c:  # no extension on the Client
        requestor = TaskRequestor(c.session)
        face = requestor.ext
        assert isinstance(face, ExtTaskRequestor)  # chosen from session.protocol_version
        assert await requestor.may_call_as_task("slow_compute")  # X-CAP-2
        polls: list[Any] = []
        result = await requestor.run_tool("slow_compute", {"seconds": 0.2}, on_status=polls.append)
        assert text_of(result) == "done after 0.2s (no label)"
        # X-POLL-2: one poll per pollIntervalMs (FastMCP suggests 5000 ms), not a busy loop
        interval = polls[0].pollIntervalMs
        assert interval and (interval < 1000 or len(polls) <= 4), polls
        # X-CAP-11: declared on this request only; the server decides (X-CAP-4)
        result = await requestor.call_tool("confirm_delete", {"filename": "b"})
        assert text_of(result) == "deleted b"  # inputRequests -> tasks/update (X-UPD-2)
        result = await requestor.call_tool("failing_job", {})
        assert result.is_error and text_of(result) == "job failed"  # X-GET-9: completed
        # 2025-11-25-only requests say so (X-COMPAT-4)
        with pytest.raises(TaskNotSupported):
            await requestor.list()
        with pytest.raises(TaskNotSupported):
            await requestor.get("any")
        created = await face.call_tool("slow_compute", {"seconds": 30})
        assert isinstance(created, ext.CreateTaskResult)
        got = await face.get(created.taskId)
        assert got.taskId == created.taskId and got.status in ext.NON_TERMINAL  # X-CREATE-3
        await face.cancel(created.taskId)
        with pytest.raises(MCPError) as cancelled:  # tasks/result is gone: polled instead
            await requestor.result(created.taskId)
        assert cancelled.value.code == RequestCancelled.code
        with pytest.raises(MCPError) as unknown:  # X-GET-8
            await face.get("no-such-task")
        assert unknown.value.code == types.INVALID_PARAMS


async def test_abandoned_call_cancels_its_task(url: str) -> None:
    """X-CAN-1: a caller that gives up on a call in progress cancels the task."""
    extension = TasksClientExtension()
    async with Client(url, extensions=[extension]) as c:
        ids: list[str] = []
        with anyio.CancelScope() as give_up:

            def seen(task: Any) -> None:  # the task exists and is being polled: give up
                ids.append(task.taskId)
                give_up.cancel()

            extension.on_status = seen
            with anyio.fail_after(60):
                await c.call_tool("slow_compute", {"seconds": 60})
        assert ids and give_up.cancelled_caught
        requestor = extension.requestor(c.session)
        assert (await requestor.wait(ids[0])).status == ext.CANCELLED


async def test_stock_client_with_our_extension_over_stdio() -> None:
    """The same claim over stdio against our example server (one connection, 2026-07-28)."""
    server = StdioServerParameters(
        command=sys.executable, args=["-m", SERVER_MODULE, "--stdio"], env=node_env()
    )
    seen: list[Any] = []
    extension = TasksClientExtension(on_status=seen.append)
    async with Client(server, extensions=[extension], elicitation_callback=on_elicit) as c:
        assert c.session.protocol_version == ext.REVISION
        for tool in ("slow_compute", "confirm_delete", "test_tool_with_task"):
            arguments, is_error, text = CONTRACT[tool]
            seen.clear()
            result = await c.call_tool(tool, arguments)
            assert (result.is_error, text_of(result)) == (is_error, text), tool
            assert seen and seen[-1].status == ext.COMPLETED, (tool, seen)  # X-CAP-4


def test_mcptask_on_the_extension_face(url: str) -> None:
    pin = ["--protocol", ext.REVISION]  # ours serves both; auto picks 2025-11-25 there
    done = mcptask("call", url, "slow_compute", "seconds=0.2", "label=cli", "--task", *pin)
    assert done.returncode == 0 and done.stdout.strip() == "done after 0.2s (cli)", done
    assert "completed" in done.stderr  # the status line, from tasks/get
    failed = mcptask("call", url, "failing_job", *pin)  # required: a task without --task
    assert failed.returncode == 1 and failed.stdout.strip() == "job failed", failed
    detached = mcptask("call", url, "slow_compute", "seconds=30", "--detach", *pin)
    task_id = detached.stdout.strip()
    assert detached.returncode == 0 and task_id, detached
    got = mcptask("tasks", "get", url, task_id, *pin)
    assert got.returncode == 0 and '"status": "working"' in got.stdout, got
    cancelled = mcptask("tasks", "cancel", url, task_id, *pin)
    assert cancelled.returncode == 0 and task_id in cancelled.stdout, cancelled
    result = mcptask("tasks", "result", url, task_id, *pin)  # polls; the task ends cancelled
    assert result.returncode == 1 and str(RequestCancelled.code) in result.stderr, result
    listed = mcptask("tasks", "list", url, *pin)  # X-COMPAT-4: no tasks/list on this face
    assert listed.returncode == 2 and "tasks list does not exist" in listed.stderr, listed


def test_mcptask_sigint_cancels_the_task(url: str, tmp_path: Path) -> None:
    """Ctrl-C on ``call --task`` sends ``tasks/cancel`` (X-CAN-1) and exits 130; the task
    then settles ``cancelled`` (X-CAN-5: eventually)."""
    err_path = tmp_path / "stderr.txt"
    argv = [sys.executable, "-m", "mcp_tasks.cli", "call", url, "slow_compute", "seconds=60"]
    task_id = interrupt_cli_task([*argv, "--task", "--protocol", ext.REVISION], err_path)
    assert f"interrupted; task {task_id}" in err_path.read_text()
    for _ in range(50):
        got = json.loads(mcptask("tasks", "get", url, task_id, "--protocol", ext.REVISION).stdout)
        if got["status"] != ext.WORKING:
            break
    assert got["status"] == ext.CANCELLED


def test_mcptask_auto_takes_the_extension_when_the_handshake_has_no_tasks(
    fastmcp_url: str,
) -> None:
    """FastMCP 4 serves tasks only on 2026-07-28: ``auto`` goes there by itself."""
    done = mcptask("call", fastmcp_url, "slow_compute", "seconds=0.2", "--task")
    assert done.returncode == 0 and done.stdout.strip() == "done after 0.2s (no label)", done
