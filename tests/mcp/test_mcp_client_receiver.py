"""Task-augmented sampling and elicitation from server to client, end to end over stdio
(R-CAP-1, R-CREATE-2, R-INPUT-3). The server (``python -m testkit.client_task_server``, a
subprocess) is the requestor; ``TasksClientSession`` is the receiver."""

from __future__ import annotations

import json
import sys
from typing import Any

import mcp_types as types
import pytest
from mcp import StdioServerParameters, stdio_client

from mcp_tasks.runtime.client.requestor import TasksClientSession
from testkit.procs import python_env

pytestmark = pytest.mark.anyio

SERVER = ["-m", "testkit.client_task_server"]
RELATED = "io.modelcontextprotocol/related-task"


async def _run(kind: str, *, receive_tasks: bool = True, decline: bool = False) -> dict[str, Any]:
    seen: list[Any] = []

    async def sampling(ctx: Any, params: types.CreateMessageRequestParams) -> Any:
        seen.append(params)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="hi!"), model="test"
        )

    async def elicitation(ctx: Any, params: Any) -> types.ElicitResult:
        seen.append(params)
        if decline:
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    params = StdioServerParameters(command=sys.executable, args=SERVER, env=python_env())
    async with stdio_client(params) as (read, write):
        async with TasksClientSession(
            read,
            write,
            sampling_callback=sampling,
            elicitation_callback=elicitation,
            receive_tasks=receive_tasks,
        ) as s:
            await s.initialize()
            result = await s.call_tool("ask_client", {"kind": kind})
            block = result.content[0]
            assert isinstance(block, types.TextContent), result
            out: dict[str, Any] = json.loads(block.text)
            out["callbacks"] = len(seen)
            return out


async def test_task_augmented_sampling() -> None:
    out = await _run("sampling")
    # R-CAP-1/R-CAP-3: the client declared tasks.requests.sampling.createMessage, so the
    # server sent the request as a task; R-CREATE-2: the client answered CreateTaskResult
    assert out["as_task"] is True
    assert out["callbacks"] == 1  # the ordinary sampling callback ran inside the task
    result = out["result"]
    assert result["content"] == {"type": "text", "text": "hi!"}
    assert result["role"] == "assistant"
    assert RELATED in result["_meta"]  # R-RESULT-4: it came through tasks/result
    # R-LIST-3: the client serves tasks/list for the server
    task_id = result["_meta"][RELATED]["taskId"]
    assert task_id in {t["taskId"] for t in out["listed"]["tasks"]}


@pytest.mark.parametrize("decline", [False, True])
async def test_task_augmented_elicitation(decline: bool) -> None:
    out = await _run("elicitation", decline=decline)
    assert out["as_task"] is True and out["callbacks"] == 1
    result = out["result"]
    if decline:
        assert result["action"] == "decline"
    else:
        assert result["action"] == "accept" and result["content"] == {"name": "Ada"}
    assert RELATED in result["_meta"]


async def test_without_client_capability_the_request_is_plain() -> None:
    # R-CAP-3: no tasks capability declared -> the server does not task-augment
    out = await _run("elicitation", receive_tasks=False)
    assert out["as_task"] is False
    assert out["result"]["action"] == "accept"
    assert RELATED not in out["result"].get("_meta", {})
