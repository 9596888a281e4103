"""``mcp_tasks.testing.memory.memory_client``: a user's own task tools tested in memory, as a
user's pytest would, on both faces: the exact result, progress, a question the tool asks
(answered by the session's callback), a tool error, and an error raised inside the block
as itself."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

from mcp_tasks.protocol import TASK_SUPPORT_OPTIONAL
from mcp_tasks.runtime.serve.server import McpTasks
from mcp_tasks.testing.memory import memory_client
from testkit.mcp_e2e import text_of

pytestmark = [pytest.mark.anyio, pytest.mark.door_agnostic]  # no HTTP: no door

FACES = ["2025-11-25", "2026-07-28"]


class Name(BaseModel):
    name: str


def app() -> McpTasks:
    mcp = MCPServer("users-own")
    tasks = McpTasks(mcp)

    @tasks.tool(task_support=TASK_SUPPORT_OPTIONAL)
    @mcp.tool()
    async def count_to(ctx: Context, n: int = 2) -> str:
        for i in range(n):
            await anyio.sleep(0.05)
            await ctx.report_progress(i + 1, n, f"at {i + 1}")
        return f"counted to {n}"

    @tasks.tool(task_support=TASK_SUPPORT_OPTIONAL)
    @mcp.tool()
    async def greet(ctx: Context) -> str:
        answer = await ctx.elicit("Your name?", Name)
        return f"Hello, {answer.data.name}!" if answer.action == "accept" else "no name"

    @tasks.tool(task_support=TASK_SUPPORT_OPTIONAL)
    @mcp.tool()
    async def broken() -> str:
        raise ToolError("out of paper")  # the SDK hides any other exception's text

    return tasks


async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"name": "Ada"})


@pytest.mark.parametrize("face", FACES)
async def test_a_task_tool_runs_to_its_exact_result_with_progress(face: str) -> None:
    steps: list[str | None] = []
    statuses: list[str] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        steps.append(message)

    async with memory_client(app(), face=face) as session:
        result = await session.tasks.run_tool(
            "count_to",
            {"n": 3},
            on_status=lambda task: statuses.append(str(task.status)),
            on_progress=progress,
        )
    assert text_of(result) == "counted to 3"
    assert statuses[0] == "working" and statuses[-1] == "completed"
    assert len(statuses) == len(set(statuses)), statuses  # each status once
    assert steps and str(steps[0]).startswith("at "), steps  # X-NOTIF-7: statusMessage there


@pytest.mark.parametrize("face", FACES)
async def test_a_question_of_the_tool_is_answered_by_the_session_callback(face: str) -> None:
    """R-INPUT-3 (2025-11-25: through tasks/result), X-UPD-3 (2026-07-28: tasks/update)."""
    async with memory_client(app(), face=face, elicitation_callback=on_elicit) as session:
        result = await session.tasks.run_tool("greet", {})
    assert text_of(result) == "Hello, Ada!"


@pytest.mark.parametrize("face", FACES)
async def test_a_tool_error_is_the_result_and_an_error_inside_is_itself(face: str) -> None:
    async with memory_client(app(), face=face) as session:
        result = await session.tasks.run_tool("broken", {})
    assert result.is_error and "out of paper" in text_of(result)
    with pytest.raises(LookupError, match="mine"):
        async with memory_client(app(), face=face):
            raise LookupError("mine")


async def test_an_engine_already_running_is_used_as_it_is() -> None:
    tasks = app()
    async with tasks, memory_client(tasks) as session:
        result = await session.tasks.run_tool("count_to", {"n": 1})
        assert tasks.engine.task_group is not None
    assert text_of(result) == "counted to 1"
