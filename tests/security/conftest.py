"""Fixtures for the hardening tests; helpers live in ``testkit.sec_harness``."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from testkit.procs import started_servers
from testkit.sec_harness import FUZZ_COUNTS, SOAK_REPORT, TOKENS, HttpServer

#: Modules whose tests run against both paths of the example server: the task endpoint for
#: the task methods (the default) and the SDK's own per-request machinery (``--no-task-endpoint``).
BOTH_PATHS = frozenset({"test_isolation", "test_limits", "test_wire_fuzz", "test_ext_bad_input"})


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    module = metafunc.module.__name__.rpartition(".")[2]
    if "server_factory" in metafunc.fixturenames and module in BOTH_PATHS:
        metafunc.parametrize("http_path", ["endpoint", "sdk"])


@pytest.fixture
def http_path() -> str:
    """Which path serves the task methods: ``endpoint`` (the default) or ``sdk``."""
    return "endpoint"


@pytest.fixture
def server_factory(tmp_path: Path, http_path: str) -> Iterator[Callable[..., HttpServer]]:
    """``make(*args, engine_config=None)``: a started example server; stopped by PID afterwards."""
    extra = ("--no-task-endpoint",) if http_path == "sdk" else ()

    def make(*args: str, **kwargs: Any) -> HttpServer:
        return HttpServer(*args, *extra, log_dir=tmp_path, **kwargs)

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
