"""Helpers and fixtures for the end-to-end tests of the mcp SDK adapter.

The example server runs as a real subprocess: over Streamable HTTP on a free
127.0.0.1 port (``testkit.example_server``; stopped by PID in teardown, always), its
task requests through each front door (the fixtures take ``front_door``), or over stdio
through the SDK's ``stdio_client``. Timeouts are generous (loaded 2-core machines); no
test asserts on timing.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from mcp_tasks.core import models
from mcp_tasks.runtime.client.requestor import TasksClientSession
from testkit.doors import door_of, http_targets
from testkit.example_server import SERVER_MODULE, HttpServer, ServerPool
from testkit.procs import python_env, started_servers
from testkit.redis_fixtures import RedisServer
from testkit.wait import until

__all__ = ["SERVER_MODULE", "HttpServer"]  # re-exported: the mcp and interop tests use them

TOKENS = {"tok-alice": "alice", "tok-bob": "bob"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def http_server_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerPool]:
    """The module's shared example servers, one per front door (started on first use)."""
    pool = ServerPool(tmp_path_factory.mktemp("http"))
    try:
        yield pool
    finally:
        pool.close()


@pytest.fixture(scope="module")
def http_server(http_server_pool: ServerPool, front_door: str) -> HttpServer:
    """A shared plain HTTP example server (stateful sessions, memory store), per door."""
    return http_server_pool.get(front_door)


@pytest.fixture
def http_server_factory(tmp_path: Path, front_door: str) -> Iterator[Callable[..., HttpServer]]:
    """``make(*extra_args)``: a started example server, its task requests through
    ``front_door``; stopped by PID afterwards."""
    new = functools.partial(HttpServer, log_dir=tmp_path, front_door=front_door)
    with started_servers(new) as make:
        yield make


def write_tokens(path: Path, tokens: dict[str, str]) -> Path:
    """The example server's ``--tokens`` file: bearer token -> requestor subject."""
    path.write_text(json.dumps(tokens))
    return path


@pytest.fixture
def tokens_file(tmp_path: Path) -> Path:
    return write_tokens(tmp_path / "tokens.json", TOKENS)


#: The task lease of the example servers on Redis (seconds): short, so that the tasks of a
#: killed instance fail soon.
REDIS_LEASE_S = 2


def redis_store(url: str, ns: str) -> str:
    """The example server's ``--store`` on the Redis at ``url``, in namespace ``ns``."""
    return f"{url}?namespace={ns}&lease={REDIS_LEASE_S}"


@pytest.fixture
def redis_example_server(
    http_server_factory: Callable[..., HttpServer], tokens_file: Path, redis_server: RedisServer
) -> Callable[..., HttpServer]:
    """``make(ns, *extra_args)``: a started example server on namespace ``ns`` of the
    session's Redis (``redis_server``, which the test module provides) with the token file
    of :data:`TOKENS`, so one bearer token is one requestor on every server made."""

    def make(ns: str, *extra: str) -> HttpServer:
        store = redis_store(redis_server.url, ns)
        return http_server_factory(*extra, "--tokens", str(tokens_file), "--store", store)

    return make


@asynccontextmanager
async def _initialized(read: Any, write: Any, **kwargs: Any) -> AsyncIterator[TasksClientSession]:
    async with TasksClientSession(read, write, **kwargs) as session:
        await session.initialize()
        yield session


@asynccontextmanager
async def http_session(
    url: str, *, token: str | None = None, **kwargs: Any
) -> AsyncIterator[TasksClientSession]:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60, read=300)) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with _initialized(read, write, **kwargs) as session:
                yield session


@asynccontextmanager
async def stdio_command_session(
    command: str, args: list[str], env: dict[str, str], **kwargs: Any
) -> AsyncIterator[TasksClientSession]:
    """An initialized session to the server ``command args...`` started over stdio."""
    params = StdioServerParameters(command=command, args=args, env=env)
    async with stdio_client(params) as (read, write):
        async with _initialized(read, write, **kwargs) as session:
            yield session


def stdio_session(
    *args: str, module: str = SERVER_MODULE, **kwargs: Any
) -> AbstractAsyncContextManager[TasksClientSession]:
    """An initialized session to ``python -m module args...`` (the example server) over stdio."""
    return stdio_command_session(sys.executable, ["-m", module, *args], python_env(), **kwargs)


@pytest.fixture(params=http_targets("stdio"))
def connect(request: pytest.FixtureRequest) -> Any:
    """``connect(**session_kwargs)``: an initialized session to the example server over
    Streamable HTTP (the module's shared server, through each front door) or stdio (a fresh
    subprocess)."""
    door = door_of(request.param)
    if door is not None:
        server = request.getfixturevalue("http_server_pool").get(door)
        return lambda **kw: http_session(server.url, **kw)
    return lambda **kw: stdio_session("--stdio", **kw)


# ---------------------------------------------------------------- the example tool contract
# ``tests/interop/ts_server.mjs`` serves the same tools, so its tests share these.

#: the example server's tools and their ``execution.taskSupport``
TOOL_TASK_SUPPORT = {
    "greet": "forbidden",
    "slow_compute": "optional",
    "failing_job": "required",
    "protocol_error_job": "required",
    "confirm_delete": "optional",
}
#: the official conformance suite's fixture tools: the example server has them, the TS peer not
FIXTURE_TOOL_TASK_SUPPORT = {"multi_input": "optional", "test_tool_with_task": "required"}
#: ``confirm_delete``'s answer to the user's elicitation action -> the word its result starts with
CONFIRM_OUTCOMES = [("accept", "deleted"), ("decline", "kept")]


async def assert_tasks_contract(
    session: TasksClientSession, fixtures: bool = False
) -> dict[str, Any]:
    """R-CAP-1, R-CAP-2: revision 2025-11-25, the tasks capability {list, cancel,
    requests.tools.call} and each example tool's taskSupport (``fixtures``: the conformance
    fixture tools too). Returns the capabilities."""
    wanted = {**TOOL_TASK_SUPPORT, **(FIXTURE_TOOL_TASK_SUPPORT if fixtures else {})}
    init = session.initialize_result
    assert init is not None and init.protocol_version == "2025-11-25"
    caps: dict[str, Any] = init.capabilities.model_dump(by_alias=True, exclude_none=True)
    assert caps["tasks"] == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    tools = (await session.list_tools()).tools
    assert {t.name: await session.tasks.task_support(t.name) for t in tools} == wanted
    return caps


def text_of(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


@dataclass
class ConfirmRun:
    """What one ``confirm_delete`` run as a task showed its requestor."""

    result: types.CallToolResult
    statuses: list[str]  # each task status the requestor helper saw, in order
    asked: list[dict[str, Any]]  # the ``_meta`` of each elicitation the user was asked


async def run_confirm_delete(connect: Any, action: str) -> ConfirmRun:
    """``confirm_delete`` of ``/tmp/x`` run as a task by ``run_tool`` over ``connect()``,
    the user answering its elicitation with ``action`` (``accept`` confirms)."""
    run = ConfirmRun(types.CallToolResult(content=[]), [], [])

    async def on_elicit(ctx: Any, params: Any) -> types.ElicitResult:
        run.asked.append(dict(ctx.meta or {}))
        if action == "accept":
            return types.ElicitResult(action="accept", content={"confirm": True})
        return types.ElicitResult(action="decline")

    async with connect(elicitation_callback=on_elicit) as s:
        run.result = await s.tasks.run_tool(
            "confirm_delete",
            {"path": "/tmp/x"},
            on_status=lambda t: run.statuses.append(t.status.value),
        )
    return run


async def cancel_while_result_held(
    starter: TasksClientSession, holder: TasksClientSession, canceller: TasksClientSession
) -> str:
    """A long ``slow_compute`` task started through ``starter``, its ``tasks/result`` held
    through ``holder`` while ``canceller`` cancels it (sessions of one requestor, on other
    instances or workers): the cancel answers ``cancelled`` and the held ``tasks/result``
    answers the cancellation (-32800). The task's id."""
    long = (await starter.tasks.call_tool_as_task("slow_compute", {"seconds": 120})).task.taskId
    caught: list[MCPError] = []

    async def hold_result() -> None:
        try:
            await holder.tasks.result(long)
        except MCPError as exc:
            caught.append(exc)

    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:
            tg.start_soon(hold_result)
            # No observable tells that the holder's wait began (it is inside the other
            # process), and a cancel that comes first gets the same answer: a pause makes
            # "held" likely.
            await anyio.sleep(0.5)
            cancelled = await canceller.tasks.cancel(long)
            assert cancelled.status == models.TaskStatus.cancelled
    assert caught and caught[0].code == -32800
    return long


def interrupt_cli_task(argv: list[str], err_path: Path) -> str:
    """Run the ``mcptask`` command ``argv`` (a ``call --task``), send it Ctrl-C once its task
    shows ``working`` on stderr (kept in ``err_path``), check it exits 130; the task's id."""
    with open(err_path, "w") as err:
        proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, text=True
        )
        try:

            def working() -> bool:
                assert proc.poll() is None, err_path.read_text()
                return "working" in err_path.read_text()

            until(working, 60, interval=0.1, what="the task shows working on stderr")
            task_id = err_path.read_text().split("task ", 1)[1].split(":", 1)[0]
            os.kill(proc.pid, signal.SIGINT)
            assert proc.wait(timeout=60) == 130, err_path.read_text()
        finally:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
    return task_id
