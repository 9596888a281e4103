"""Keep benchmarks/peers/scaleout.py working: its quick mode, 1 and 2 example-server workers
on a Redis of its own (rows present and well formed; no timing asserts)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.redis_fixtures import redis_server_binary

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "peers" / "scaleout.py"

pytestmark = pytest.mark.slow


def test_scaleout_quick(tmp_path: Path) -> None:
    redis_server_binary()  # skips (or fails under CI) without redis-server
    rows_path = tmp_path / "rows.json"
    out = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--json", str(rows_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    rows = json.loads(rows_path.read_text())
    assert [r["workers"] for r in rows] == [1, 2]
    assert all(r["tasks"] > 0 and r["x_1_worker"] is not None for r in rows)
    assert [len(shares) for shares in rows[1]["worker_cpu_share"]] == [2]
    assert "| workers | tasks/s | × 1 worker |" in out.stdout
