"""Keep benchmarks/bench_redis.py working: --quick against the test Redis (no timing asserts)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from testkit.redis_fixtures import RedisServer

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_redis.py"


def test_bench_redis_quick(redis_server: RedisServer) -> None:
    out = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--url", redis_server.url],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, out.stderr
    for needle in ("lifecycle", "tasks/s", "round trips per task lifecycle", "p50", "p99"):
        assert needle in out.stdout
    if shutil.which("redis-benchmark"):
        assert "baseline redis-benchmark" in out.stdout
