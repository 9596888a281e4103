"""Fixtures for the interoperability tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.interop import HttpServer, npm_ci


@pytest.fixture(scope="session")
def node_modules() -> None:
    """``npm ci`` (pinned by package-lock.json) when node_modules is missing or stale."""
    npm_ci()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def example_http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    """Our example server over Streamable HTTP on a free 127.0.0.1 port (stopped by PID)."""
    server = HttpServer(log_dir=Path(tmp_path_factory.mktemp("example-http")))
    try:
        yield server.start()
    finally:
        server.stop()
