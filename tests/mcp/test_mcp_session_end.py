"""Tasks bound to a transport session end with it (R-SEC-1, R-CANCEL-2).

A session-bound task (no bearer subject) can be reached only from its session; when
the session ends (stdio: the client closes; Streamable HTTP: the client DELETEs the
session) the adapter cancels it instead of running it to the end and keeping its
result for the whole ttl. A subject-bound task is kept: a reconnecting client with
the same token reaches it. The server uses ``--store sqlite:PATH`` so the test can
read the task after the session is gone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mcp_tasks import protocol
from mcp_tasks.runtime.stores.sqlite import SqliteTaskStore
from testkit.mcp_e2e import http_session, stdio_session
from testkit.wait import until_async

pytestmark = pytest.mark.anyio

LONG = {"seconds": 600, "label": "orphan"}


async def _status_when_settled(db: Path, task_id: str) -> str:
    """The task's stored status once it is terminal."""

    async def status() -> Any:
        rec = await store.get(task_id)
        assert rec is not None, "the task is in the store"
        return rec.status

    store = SqliteTaskStore(db)
    try:
        settled = await until_async(
            status, satisfied=lambda s: s in protocol.TERMINAL, interval=0.1, what="terminal"
        )
        return str(settled)
    finally:
        await store.close()


async def test_http_session_delete_cancels_its_tasks(
    http_server_factory: Any, tmp_path: Path
) -> None:
    db = tmp_path / "tasks.db"
    server = http_server_factory("--store", f"sqlite:{db}")
    async with http_session(server.url) as s:  # leaving it sends DELETE (terminate_on_close)
        created = await s.tasks.call_tool_as_task("slow_compute", LONG)
        assert created.task.status == protocol.WORKING
    assert await _status_when_settled(db, created.task.taskId) == protocol.CANCELLED


async def test_stdio_close_cancels_its_tasks(tmp_path: Path) -> None:
    db = tmp_path / "tasks.db"
    async with stdio_session("--stdio", "--store", f"sqlite:{db}") as s:
        created = await s.tasks.call_tool_as_task("slow_compute", LONG)
        assert created.task.status == protocol.WORKING
    assert await _status_when_settled(db, created.task.taskId) == protocol.CANCELLED


async def test_subject_bound_tasks_outlive_the_session(
    http_server_factory: Any, tokens_file: Path, tmp_path: Path
) -> None:
    # R-SEC-1: bound to the bearer subject, the task is still reachable after a reconnect.
    server = http_server_factory(
        "--store", f"sqlite:{tmp_path / 'tasks.db'}", "--tokens", str(tokens_file)
    )
    async with http_session(server.url, token="tok-alice") as s:
        created = await s.tasks.call_tool_as_task("slow_compute", LONG)
    async with http_session(server.url, token="tok-alice") as s:
        task = await s.tasks.get(created.task.taskId)
        assert task.status == protocol.WORKING
        cancelled = await s.tasks.cancel(created.task.taskId)
        assert cancelled.status == protocol.CANCELLED
