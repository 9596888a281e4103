"""bench_generate.py keeps working (quick mode; it prints figures, the test asserts none of them)."""

from __future__ import annotations

import subprocess
import sys

from testkit.gen import REPO


def test_bench_generate_quick() -> None:
    out = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_generate.py"), "--quick"],
        check=True,
        capture_output=True,
        text=True,
        timeout=240,
    ).stdout
    for row in (
        "both schemas, cold",
        "both schemas --check, warm cache",
        "2025-11-25 only, cold",
        "plain datamodel-codegen",
        "import pydantic",
    ):
        assert row in out, out
