"""Helpers and fixtures for the end-to-end tests of the mcp SDK adapter.

The example server runs as a real subprocess: over Streamable HTTP on a free
127.0.0.1 port (stopped by PID in teardown, always), or over stdio through the
SDK's ``stdio_client``. Timeouts are generous (loaded 2-core machines); no test
asserts on timing.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from procs import stop_process, wait_listening

from mcp_tasks.runtime.mcp_client import TasksClientSession

STARTUP_TIMEOUT = 60.0
SERVER_MODULE = "mcp_tasks.examples.server"
TOKENS = {"tok-alice": "alice", "tok-bob": "bob"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    return env


class HttpServer:
    """One example server subprocess on 127.0.0.1."""

    def __init__(self, *extra: str, log_dir: Path) -> None:
        self.extra = list(extra)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.log_path = log_dir / f"server-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> HttpServer:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", SERVER_MODULE, "--http", f"127.0.0.1:{self.port}", *self.extra],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=_env(),
        )
        log.close()
        wait_listening(self.proc, self.port, self.log_path, STARTUP_TIMEOUT, "server")
        return self

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        stop_process(proc)


@pytest.fixture
def http_server_factory(tmp_path: Path) -> Iterator[Any]:
    started: list[HttpServer] = []

    def make(*extra: str) -> HttpServer:
        server = HttpServer(*extra, log_dir=tmp_path)
        started.append(server)
        return server.start()

    try:
        yield make
    finally:
        for server in started:
            server.stop()


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    """A shared plain HTTP example server (stateful sessions, memory store)."""
    server = HttpServer(log_dir=tmp_path_factory.mktemp("http"))
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture
def tokens_file(tmp_path: Path) -> Path:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps(TOKENS))
    return path


@asynccontextmanager
async def http_session(
    url: str, *, token: str | None = None, **kwargs: Any
) -> AsyncIterator[TasksClientSession]:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60, read=300)) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with TasksClientSession(read, write, **kwargs) as session:
                await session.initialize()
                yield session


@asynccontextmanager
async def stdio_session(
    *args: str, module: str = SERVER_MODULE, **kwargs: Any
) -> AsyncIterator[TasksClientSession]:
    params = StdioServerParameters(command=sys.executable, args=["-m", module, *args], env=_env())
    async with stdio_client(params) as (read, write):
        async with TasksClientSession(read, write, **kwargs) as session:
            await session.initialize()
            yield session


@pytest.fixture(params=["http", "stdio"])
def connect(request: pytest.FixtureRequest) -> Any:
    """``connect(**session_kwargs)``: an initialized session to the example server over
    Streamable HTTP (the shared server) or stdio (a fresh subprocess)."""
    if request.param == "http":
        server: HttpServer = request.getfixturevalue("http_server")
        return lambda **kw: http_session(server.url, **kw)
    return lambda **kw: stdio_session("--stdio", **kw)
