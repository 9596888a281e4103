"""The stock ``mcp`` (Python SDK 2.3) ``Client`` -> our example server.

``tests/mcp`` drives the server with *our* ``TasksClientSession`` and ``TaskRequestor``.
What it does not cover, and this does: the SDK's own high-level ``mcp.Client``, unmodified,
with only the SDK's task wire types (``GetTaskRequest``, ``GetTaskPayloadRequest``,
``ListTasksRequest``, ``CancelTaskRequest``) through its public ``send_request``. The SDK has
no task API for the task-augmented ``tools/call`` itself (its ``send_request`` validates
``tools/call`` results as ``CallToolResult``), so that one request goes raw. Also: the
stock client negotiates 2026-07-28 by default, where our server offers the tasks extension
(which this client does not declare: no task for it).
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from mcp_tasks.runtime.client.requestor import raw_request
from testkit.doors import door_of, http_targets
from testkit.interop import EXAMPLE_TASK_SUPPORT, SERVER_MODULE, HttpServer, node_env

pytestmark = pytest.mark.anyio

RELATED = "io.modelcontextprotocol/related-task"
TERMINAL = {"completed", "failed", "cancelled"}


@pytest.fixture(params=http_targets("stdio"))
def target(request: pytest.FixtureRequest) -> Any:
    """Our example server over HTTP (through each front door) or a stdio subprocess."""
    door = door_of(request.param)
    if door is not None:
        server: HttpServer = request.getfixturevalue("http_server_pool").get(door)
        return server.url
    return StdioServerParameters(
        command=sys.executable, args=["-m", SERVER_MODULE, "--stdio"], env=node_env()
    )


async def create(c: Client, name: str, arguments: dict[str, Any], **task: Any) -> str:
    raw = await raw_request(
        c.session, "tools/call", {"name": name, "arguments": arguments, "task": task}
    )
    created = types.CreateTaskResult.model_validate(raw)  # R-CREATE-2
    assert created.task.status == "working"  # R-STATE-1
    return created.task.task_id


async def get(c: Client, task_id: str) -> types.GetTaskResult:
    request = types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id))
    return await c.session.send_request(request, types.GetTaskResult)


async def poll(c: Client, task_id: str) -> list[types.GetTaskResult]:
    """R-GET-1, R-GET-2: tasks/get every pollInterval until terminal or input_required."""
    seen = [await get(c, task_id)]
    while seen[-1].status not in TERMINAL and seen[-1].status != "input_required":
        await anyio.sleep((seen[-1].poll_interval or 500) / 1000)  # as the server asks
        seen.append(await get(c, task_id))
    return seen


async def result(c: Client, task_id: str) -> types.CallToolResult:
    request = types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=task_id))
    return await c.session.send_request(request, types.CallToolResult)


def text_of(res: types.CallToolResult) -> str:
    block = res.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def test_legacy_handshake_capabilities(target: Any) -> None:
    async with Client(target, mode="legacy") as c:
        assert c.protocol_version == "2025-11-25"
        tasks = c.server_capabilities.tasks  # R-CAP-1, R-CAP-2, parsed by the SDK's own types
        assert tasks is not None and tasks.list is not None and tasks.cancel is not None
        assert tasks.requests is not None and tasks.requests.tools is not None
        listed = (await c.list_tools()).tools
        support = {t.name: t.execution.task_support if t.execution else None for t in listed}
        assert support == EXAMPLE_TASK_SUPPORT


async def test_completed_listed_cancelled(target: Any) -> None:
    async with Client(target, mode="legacy") as c:
        tid = await create(c, "slow_compute", {"seconds": 0.5, "label": "sdk"}, ttl=60000)
        seen = await poll(c, tid)
        assert seen[-1].status == "completed" and seen[-1].ttl == 60000  # R-TTL-2
        res = await result(c, tid)
        assert text_of(res) == "done after 0.5s (sdk)"  # R-RESULT-1, R-RESULT-3
        assert res.meta is not None and res.meta[RELATED] == {"taskId": tid}  # R-RESULT-4
        listed = await c.session.send_request(types.ListTasksRequest(), types.ListTasksResult)
        assert tid in {t.task_id for t in listed.tasks}  # R-LIST-3

        slow = await create(c, "slow_compute", {"seconds": 60})
        cancel = types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=slow))
        cancelled = await c.session.send_request(cancel, types.CancelTaskResult)
        assert cancelled.status == "cancelled"  # R-CANCEL-2
        assert (await get(c, slow)).status == "cancelled"  # R-CANCEL-3
        with pytest.raises(MCPError) as again:
            await c.session.send_request(cancel, types.CancelTaskResult)
        assert again.value.code == -32602  # R-CANCEL-1


async def test_failed_both_kinds(target: Any) -> None:
    async with Client(target, mode="legacy") as c:
        tid = await create(c, "failing_job", {})
        assert (await poll(c, tid))[-1].status == "failed"  # R-STATE-4
        res = await result(c, tid)
        assert res.is_error and text_of(res) == "job failed"  # R-RESULT-1
        tid = await create(c, "protocol_error_job", {})
        final = (await poll(c, tid))[-1]
        assert final.status == "failed" and final.status_message  # R-STATE-4, R-ERR-3
        with pytest.raises(MCPError) as err:
            await result(c, tid)
        assert err.value.code == -32603  # R-RESULT-1: the same JSON-RPC error


async def test_elicitation_through_the_stock_callback(target: Any) -> None:
    asked: list[dict[str, Any]] = []

    async def on_elicit(ctx: Any, params: Any) -> types.ElicitResult:
        asked.append(dict(ctx.meta or {}))
        return types.ElicitResult(action="accept", content={"confirm": True})

    async with Client(target, mode="legacy", elicitation_callback=on_elicit) as c:
        tid = await create(c, "confirm_delete", {"path": "/tmp/x"})
        assert (await poll(c, tid))[-1].status == "input_required"  # R-INPUT-1
        res = await result(c, tid)  # R-INPUT-3: the elicitation arrives meanwhile
        assert text_of(res) == "deleted /tmp/x"
        assert asked == [{RELATED: {"taskId": tid}}]  # R-INPUT-2
        assert (await get(c, tid)).status == "completed"  # R-INPUT-4


async def test_modern_negotiation_offers_the_extension(target: Any) -> None:
    """The stock client's default ``mode="auto"`` negotiates 2026-07-28: no core tasks
    capability and no taskSupport there, but ``server/discover`` lists the tasks extension
    (X-CAP-2); without the client declaring it, an optional tool runs plainly (X-CAP-5) and
    the legacy ``task`` param is ignored (X-CREATE-5)."""
    async with Client(target) as c:
        assert c.protocol_version == "2026-07-28"
        assert c.server_capabilities.tasks is None
        assert c.server_capabilities.extensions == {"io.modelcontextprotocol/tasks": {}}
        assert all(t.execution is None for t in (await c.list_tools()).tools)
        request = types.CallToolRequest(
            params=types.CallToolRequestParams(
                name="slow_compute", arguments={"seconds": 0}, task=types.TaskMetadata(ttl=1000)
            )
        )
        plain = await c.session.send_request(request, types.CallToolResult)
        assert text_of(plain) == "done after 0s (no label)"


async def test_modern_negotiation_required_tool_needs_the_extension(target: Any) -> None:
    """X-CAP-8: a task-required tool called without the extension declared: -32021 with
    ``data.requiredCapabilities`` naming it."""
    async with Client(target) as c:
        with pytest.raises(MCPError) as err:
            await c.call_tool("failing_job", {})
        assert err.value.code == -32021
        assert err.value.error.data == {
            "requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}
        }
