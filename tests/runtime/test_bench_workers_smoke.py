"""Keep benchmarks/bench_workers.py working: its quick mode, the in-process rows and those on
1 and 2 workers, for the lifecycle and the CPU-bound tool (rows present and well formed; no
timing asserts)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.redis_fixtures import redis_server_binary

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_workers.py"

pytestmark = pytest.mark.slow


def test_bench_workers_quick(tmp_path: Path) -> None:
    redis_server_binary()  # skips (or fails under CI) without redis-server
    rows_path = tmp_path / "rows.json"
    out = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--json", str(rows_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    rows = json.loads(rows_path.read_text())
    assert [(r["workload"], r["row"]) for r in rows] == [
        (w, n) for w in ("lifecycle", "cpu") for n in ("in-process", "1 worker", "2 workers")
    ]
    assert all(r["tasks"] > 0 for r in rows)
    assert all(r["workers_cpu"] > 0 for r in rows if r["row"] != "in-process")
    assert "| workload | work | tasks/s |" in out.stdout
