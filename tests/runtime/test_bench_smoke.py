"""Keep benchmarks/bench_runtime.py working: run it in --quick mode (no timing assertions)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_runtime.py"


def test_bench_runtime_quick() -> None:
    out = subprocess.run(
        [sys.executable, str(BENCH), "--quick"], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    for needle in ("InMemoryTaskStore create", "SqliteTaskStore get", "p99", "ratio", "bytes/task"):
        assert needle in out.stdout
