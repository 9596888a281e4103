"""Fixtures of the operator-surface tests (helpers: ``ops_harness``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from ops_harness import OpsServer
from procs import started_servers
from redis_fixtures import redis_server

__all__ = ["ops_server_factory", "redis_server"]


@pytest.fixture
def ops_server_factory(tmp_path: Path) -> Iterator[Callable[..., OpsServer]]:
    """``make(**options)``: a started example server with operator surfaces (``OpsServer``);
    every one is stopped by PID afterwards."""
    count = iter(range(1000))

    def make(**kwargs: Any) -> OpsServer:
        where = tmp_path / f"server-{next(count)}"
        where.mkdir()
        return OpsServer(where, **kwargs)

    with started_servers(make) as start:
        yield start
