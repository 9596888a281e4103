"""Clients that survive a restart: ``TaskRequestor`` (both faces), on a session whose HTTP
client is ``mcp_client.http_client()``, sends its requests about a task again while the
server is down, and when it cannot go on raises ``ConnectionLost`` carrying the task id.

The server is a real example server process on a SQLite file (tasks survive it), killed by
PID inside the requestor's own status callback, so the restart falls exactly between two
of its requests, and started again on the same port in the background."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from mcp_tasks.runtime.client.requestor import ConnectionLost, TasksClientSession, http_client
from testkit.mcp_e2e import HttpServer, text_of

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.door_agnostic,
]  # restarts: the door is not what is tested (testkit.doors)

TOKEN = "tok-alice"  # a subject of testkit.mcp_e2e.TOKENS


@asynccontextmanager
async def session(url: str, *, modern: bool = False) -> AsyncIterator[TasksClientSession]:
    """A session on ``http_client()``: the 2025-11-25 handshake, or (``modern``) the tasks
    extension's revision through ``server/discover``."""
    async with http_client(headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with TasksClientSession(read, write) as s:
                await (s.discover() if modern else s.initialize())
                yield s


def status_of(task: Any) -> str:
    return str(getattr(task.status, "value", task.status))


def restart_when(
    server: HttpServer, status: str, tg: Any, seen: list[str]
) -> Callable[[Any], None]:
    """An ``on_status`` that records each status and, the first time ``status`` shows,
    kills the server by PID and starts it again on its port in the background."""

    def on_status(task: Any) -> None:
        seen.append(status_of(task))
        if status_of(task) == status and "restarted" not in seen:
            seen.append("restarted")
            port = server.port
            server.kill()
            tg.start_soon(anyio.to_thread.run_sync, server.start, port)

    return on_status


@pytest.fixture
def sqlite_server(
    http_server_factory: Callable[..., HttpServer], tokens_file: Path, tmp_path: Path
) -> Callable[..., HttpServer]:
    def make(*extra: str) -> HttpServer:
        store = f"sqlite:{tmp_path / 'tasks.db'}"
        return http_server_factory("--tokens", str(tokens_file), "--store", store, *extra)

    return make


async def test_a_stateless_session_polls_across_a_restart(
    sqlite_server: Callable[..., HttpServer],
) -> None:
    """2025-11-25 on a stateless server: the task completed, the server went down before
    ``tasks/result`` (R-RESULT-1); the requestor sends it again until the server is back,
    which answers from the store."""
    server = sqlite_server("--stateless")
    seen: list[str] = []
    async with anyio.create_task_group() as tg, session(server.url) as s:
        on_status = restart_when(server, "completed", tg, seen)
        result = await s.tasks.run_tool("slow_compute", {"seconds": 0.3}, on_status=on_status)
    assert "restarted" in seen
    assert text_of(result) == "done after 0.3s (no label)"


async def test_a_session_the_restart_forgot_raises_the_task_id(
    sqlite_server: Callable[..., HttpServer],
) -> None:
    """2025-11-25 on a stateful server: the restarted server has no such session (404), so
    this session cannot go on; ``ConnectionLost`` carries the task id, and a new session
    with the same bearer token (R-SEC-1) gets the task's result by it."""
    server = sqlite_server()
    seen: list[str] = []
    created: list[str] = []
    raised: list[BaseException] = []
    async with anyio.create_task_group() as tg, session(server.url) as s:
        restart = restart_when(server, "completed", tg, seen)

        def on_status(task: Any) -> None:
            created.append(task.taskId)
            restart(task)

        try:
            await s.tasks.run_tool("slow_compute", {"seconds": 0.3}, on_status=on_status)
        except ConnectionLost as exc:  # caught here: the task group would wrap it
            raised.append(exc)
    (lost,) = raised
    assert isinstance(lost, ConnectionLost) and "Session not found" in str(lost)
    assert lost.task_id == created[0]
    async with session(server.url) as again:
        result = await again.tasks.tool_result(lost.task_id)
    assert text_of(result) == "done after 0.3s (no label)"


async def test_the_extension_face_polls_across_a_restart(
    sqlite_server: Callable[..., HttpServer],
) -> None:
    """2026-07-28 (no session to lose): the poll of ``tasks/get`` (X-GET-2) goes on across
    the restart and ends with what the restarted server knows: the kill stopped the work,
    so the task is ``failed`` and its error is raised (X-ERR-3), not a transport error."""
    server = sqlite_server()
    seen: list[str] = []
    raised: list[BaseException] = []
    async with anyio.create_task_group() as tg, session(server.url, modern=True) as s:
        on_status = restart_when(server, "working", tg, seen)
        try:
            await s.tasks.run_tool("slow_compute", {"seconds": 30}, on_status=on_status)
        except Exception as exc:  # caught here: the task group would wrap it
            raised.append(exc)
    (failed,) = raised
    assert isinstance(failed, MCPError), failed
    assert "the server stopped before the task finished" in failed.message
    assert seen[:2] == ["working", "restarted"] and seen[-1] == "failed"


async def test_a_server_that_stays_down_raises_the_task_id(
    sqlite_server: Callable[..., HttpServer],
) -> None:
    server = sqlite_server()
    async with session(server.url) as s:
        s.tasks.retry_s = 1.0
        created = await s.tasks.call_tool_as_task("slow_compute", {"seconds": 30})
        server.kill()
        with pytest.raises(ConnectionLost) as lost:
            await s.tasks.wait(created.task.taskId)
    assert lost.value.task_id == created.task.taskId
    assert created.task.taskId in str(lost.value)


async def test_run_tool_reports_progress(sqlite_server: Callable[..., HttpServer]) -> None:
    """R-PROGRESS-1: the tool's progress, sent after the task-augmented call returned,
    reaches ``run_tool``'s ``on_progress``."""
    server = sqlite_server()
    got: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        got.append((progress, total, message))

    async with session(server.url) as s:
        result = await s.tasks.run_tool("slow_compute", {"seconds": 0.3}, on_progress=on_progress)
    assert text_of(result) == "done after 0.3s (no label)"
    assert got and got[-1] == (3.0, 3.0, "step 3/3")
    assert not s.progress_handlers  # unregistered once the run ended


def test_mcptask_across_a_restart_prints_the_task_id_in_one_line(
    sqlite_server: Callable[..., HttpServer], tmp_path: Path
) -> None:
    """``mcptask call --task`` whose server restarts (and forgets the session) ends with one
    line naming the task and the command that asks for it again, with the options this run
    was given (``--token``, ``--header``), which then works as written: no traceback, no SDK
    log of the session's end the restarted server does not know."""
    import json
    import shlex
    import subprocess
    import sys

    from testkit.wait import until

    server = sqlite_server()
    err_path = tmp_path / "mcptask.err"
    argv = [sys.executable, "-m", "mcp_tasks.cli", "call", server.url, "slow_compute"]
    argv += ["seconds=20", "--task", "--token", TOKEN, "--header", "X-Trace: restart"]
    with open(err_path, "w") as err:
        cli = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, text=True)
    try:
        until(lambda: "working" in err_path.read_text(), 60, what="the task is working")
        server.restart()
        out, _ = cli.communicate(timeout=120)
    finally:
        if cli.poll() is None:
            cli.kill()
    errors = err_path.read_text()
    task_id = errors.split("task ", 1)[1].split(":", 1)[0]
    last = errors.strip().splitlines()[-1]
    assert cli.returncode == 1 and out == "", errors
    assert last.startswith(f"mcptask: lost the connection while following task {task_id}")
    again = f"mcptask tasks get {server.url} {task_id} --token {TOKEN} --header 'X-Trace: restart'"
    assert last.endswith(f": {again}"), last
    assert "Traceback" not in errors and "Session termination failed" not in errors, errors
    run = [sys.executable, "-m", "mcp_tasks.cli", *shlex.split(again)[1:]]
    asked = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert asked.returncode == 0, asked.stderr
    assert json.loads(asked.stdout)["taskId"] == task_id
