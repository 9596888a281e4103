"""Fixtures for the hardening tests; helpers live in ``sec_harness``."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from procs import started_servers
from sec_harness import FUZZ_COUNTS, SOAK_REPORT, TOKENS, HttpServer


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator[Callable[..., HttpServer]]:
    """``make(*args, engine_config=None)``: a started example server; stopped by PID afterwards."""
    with started_servers(functools.partial(HttpServer, log_dir=tmp_path)) as make:
        yield make


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
