"""Fixtures of the operator-surface tests (helpers: ``testkit.ops``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from testkit.ops import OpsServer
from testkit.procs import started_servers
from testkit.redis_fixtures import fresh_redis_server, redis_server, redis_url

__all__ = ["fresh_redis_server", "ops_server_factory", "redis_server", "redis_url"]


@pytest.fixture
def ops_server_factory(tmp_path: Path, front_door: str) -> Iterator[Callable[..., OpsServer]]:
    """``make(**options)``: a started example server with operator surfaces (``OpsServer``),
    its task requests through ``front_door`` (each test runs through both doors); every one
    is stopped by PID afterwards."""
    count = iter(range(1000))

    def make(**kwargs: Any) -> OpsServer:
        where = tmp_path / f"server-{next(count)}"
        where.mkdir()
        return OpsServer(where, front_door=front_door, **kwargs)

    with started_servers(make) as start:
        yield start
