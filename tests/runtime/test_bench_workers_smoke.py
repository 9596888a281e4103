"""Keep benchmarks/bench_workers.py working: its quick mode, the in-process rows and those on
1 and 2 workers, for the lifecycle and the CPU-bound tool (rows present and well formed; no
timing asserts)."""

from __future__ import annotations

from pathlib import Path

import pytest

from testkit.procs import quick_bench

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_workers.py"

pytestmark = pytest.mark.slow


def test_bench_workers_quick(tmp_path: Path) -> None:
    rows, stdout = quick_bench(BENCH, tmp_path, timeout=240)
    assert [(r["workload"], r["row"]) for r in rows] == [
        (w, n) for w in ("lifecycle", "cpu") for n in ("in-process", "1 worker", "2 workers")
    ]
    assert all(r["tasks"] > 0 for r in rows)
    assert all(r["workers_cpu"] > 0 for r in rows if r["row"] != "in-process")
    assert "| workload | work | tasks/s |" in stdout
