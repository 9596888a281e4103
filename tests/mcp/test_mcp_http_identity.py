"""Streamable HTTP only: requestor identity and persistence.

Isolation between sessions, bearer-token subjects, stateless HTTP, and a server
restart over ``--store sqlite:...``. Rule IDs refer to the spec digest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from mcp_tasks.core import models
from testkit.mcp_e2e import http_session

pytestmark = pytest.mark.anyio


async def test_isolation_between_two_sessions(http_server: Any) -> None:
    # R-SEC-1: without auth, tasks are bound to the transport session
    async with http_session(http_server.url) as a, http_session(http_server.url) as b:
        created = await a.tasks.call_tool_as_task("slow_compute", {"seconds": 0})
        tid = created.task.taskId
        await a.tasks.wait(tid)
        with pytest.raises(MCPError) as err:
            await b.tasks.get(tid)
        assert err.value.code == -32602
        with pytest.raises(MCPError):
            await b.tasks.result(tid)
        with pytest.raises(MCPError):
            await b.tasks.cancel(tid)
        assert tid not in {t.taskId for t in await b.tasks.list_all()}
        assert tid in {t.taskId for t in await a.tasks.list_all()}


async def test_restart_with_sqlite_keeps_finished_tasks(
    http_server_factory: Any, tokens_file: Path, tmp_path: Path
) -> None:
    # Tasks bound to the token's subject (R-SEC-1) survive a restart with the sqlite store.
    db = tmp_path / "tasks.db"
    args = ("--store", f"sqlite:{db}", "--tokens", str(tokens_file))
    server = http_server_factory(*args)
    async with http_session(server.url, token="tok-alice") as s:
        done = await s.tasks.call_tool_as_task("slow_compute", {"seconds": 0, "label": "kept"})
        failed = await s.tasks.call_tool_as_task("failing_job", {})
        crashed = await s.tasks.call_tool_as_task("protocol_error_job", {})
        for created in (done, failed, crashed):
            task = await s.tasks.wait(created.task.taskId)
            assert task.status in (models.TaskStatus.completed, models.TaskStatus.failed)
    server.stop()
    server = http_server_factory(*args)
    async with http_session(server.url, token="tok-alice") as s:
        task = await s.tasks.get(done.task.taskId)
        assert task.status == models.TaskStatus.completed
        result = await s.tasks.tool_result(done.task.taskId)
        assert result.content[0].text == "done after 0s (kept)"  # type: ignore[union-attr]
        assert (await s.tasks.tool_result(failed.task.taskId)).is_error is True
        with pytest.raises(MCPError) as err:  # R-RESULT-1: the stored JSON-RPC error
            await s.tasks.result(crashed.task.taskId)
        assert err.value.code == -32603
        listed = {t.taskId for t in await s.tasks.list_all()}
        assert {done.task.taskId, failed.task.taskId, crashed.task.taskId} <= listed
    async with http_session(server.url, token="tok-bob") as other:
        with pytest.raises(MCPError) as err:  # R-SEC-1: another subject sees nothing
            await other.tasks.get(done.task.taskId)
        assert err.value.code == -32602
        assert await other.tasks.list_all() == []


async def test_stateless_http_binds_tasks_to_the_token_subject(
    http_server_factory: Any, tokens_file: Path
) -> None:
    server = http_server_factory("--stateless", "--tokens", str(tokens_file))
    async with http_session(server.url, token="tok-alice") as s:
        caps = s.tasks.server_capabilities
        assert caps is not None and caps.tasks is not None and caps.tasks.list is not None
        result = await s.tasks.run_tool("slow_compute", {"seconds": 0.2, "label": "sl"})
        assert result.content[0].text == "done after 0.2s (sl)"  # type: ignore[union-attr]
        created = await s.tasks.call_tool_as_task("slow_compute", {"seconds": 0})
    # a new connection with the same token is the same requestor
    async with http_session(server.url, token="tok-alice") as s2:
        assert (await s2.tasks.wait(created.task.taskId)).status == models.TaskStatus.completed
    async with http_session(server.url, token="tok-bob") as s3:
        with pytest.raises(MCPError):
            await s3.tasks.get(created.task.taskId)


async def test_stateless_without_identity_does_not_declare_list(http_server_factory: Any) -> None:
    # R-SEC-2: no binding possible -> no tasks.list
    server = http_server_factory("--stateless")
    async with http_session(server.url) as s:
        caps = s.tasks.server_capabilities
        assert caps is not None and caps.tasks is not None
        assert caps.tasks.list is None and caps.tasks.cancel is not None
