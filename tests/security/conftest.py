"""Fixtures for the hardening tests; helpers live in ``testkit.sec_harness``."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from testkit.ops import OpsServer
from testkit.procs import started_servers
from testkit.sec_harness import FUZZ_COUNTS, SOAK_REPORT, TOKENS, HttpServer


@pytest.fixture
def server_factory(tmp_path: Path, front_door: str) -> Iterator[Callable[..., HttpServer]]:
    """``make(*args, engine_config=None)``: a started example server, its task requests
    through ``front_door`` (each test runs through both doors); stopped by PID afterwards."""

    def make(*args: str, **kwargs: Any) -> HttpServer:
        return HttpServer(*args, log_dir=tmp_path, front_door=front_door, **kwargs)

    with started_servers(make) as start:
        yield start


@pytest.fixture
def ops_servers(tmp_path: Path, front_door: str) -> Iterator[Callable[..., OpsServer]]:
    """``make(*flags)``: a started example server with operator surfaces (``OpsServer``) and
    ``flags`` besides, its task requests through ``front_door``; stopped by PID afterwards."""
    count = iter(range(100))

    def make(*extra: str) -> OpsServer:
        where = tmp_path / f"ops-{next(count)}"
        where.mkdir()
        return OpsServer(where, front_door=front_door, extra=extra)

    with started_servers(make) as start:
        yield start


@pytest.fixture
def tokens_file(tmp_path: Path) -> Path:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps(TOKENS))
    return path


@pytest.fixture
def fuzz_counter() -> Callable[[str, int], None]:
    def count(key: str, n: int = 1) -> None:
        FUZZ_COUNTS[key] = FUZZ_COUNTS.get(key, 0) + n

    return count


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if FUZZ_COUNTS:
        total = sum(FUZZ_COUNTS.values())
        parts = ", ".join(f"{k}: {v}" for k, v in sorted(FUZZ_COUNTS.items()))
        terminalreporter.write_line(f"fuzz cases run: {total} ({parts})")
    for line in SOAK_REPORT:
        terminalreporter.write_line(line)
