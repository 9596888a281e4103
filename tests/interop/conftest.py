"""Fixtures for the interoperability tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.example_server import HttpServer, ServerPool
from testkit.interop import npm_ci


@pytest.fixture(scope="session")
def node_modules() -> None:
    """``npm ci`` (pinned by package-lock.json) when node_modules is missing or stale."""
    npm_ci()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def example_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerPool]:
    """The module's example servers, one per front door, started on first use (for fixtures
    whose parameters are :func:`testkit.doors.http_targets`); stopped by PID."""
    pool = ServerPool(Path(tmp_path_factory.mktemp("example-http")))
    try:
        yield pool
    finally:
        pool.close()


@pytest.fixture(scope="module")
def example_http(example_pool: ServerPool, front_door: str) -> HttpServer:
    """Our example server over Streamable HTTP on a free 127.0.0.1 port, its task requests
    through ``front_door``."""
    return example_pool.get(front_door)
