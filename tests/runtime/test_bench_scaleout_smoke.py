"""Keep benchmarks/peers/scaleout.py working: its quick mode, 1 and 2 example-server workers
on a Redis of its own (rows present and well formed; no timing asserts)."""

from __future__ import annotations

from pathlib import Path

import pytest

from testkit.procs import quick_bench

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "peers" / "scaleout.py"

pytestmark = pytest.mark.slow


def test_scaleout_quick(tmp_path: Path) -> None:
    rows, stdout = quick_bench(BENCH, tmp_path, timeout=240)
    assert [r["workers"] for r in rows] == [1, 2]
    assert all(r["tasks"] > 0 and r["x_1_worker"] is not None for r in rows)
    assert [len(shares) for shares in rows[1]["worker_cpu_share"]] == [2]
    assert "| workers | tasks/s | × 1 worker |" in stdout
