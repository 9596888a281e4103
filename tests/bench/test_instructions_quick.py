"""Keep benchmarks/bench_instructions.py working: its --quick mode end to end, under valgrind
(no timing assertions: it counts instructions, and the test checks only the report's shape).

``.ci/run`` installs valgrind and strace; elsewhere the test is skipped without valgrind.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.procs import before_checkout

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks" / "bench_instructions.py"


def _valgrind() -> None:
    if shutil.which("valgrind") is None:
        if os.environ.get("CI"):
            pytest.fail("CI: valgrind is required (.ci/run installs it)")
        pytest.skip("valgrind is not installed")


def _run(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--out", str(tmp_path / "out"), *args],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )


def test_counts_instructions_per_operation_of_both_sides(tmp_path: Path) -> None:
    _valgrind()
    before = before_checkout(ROOT, tmp_path)
    # the smallest run that shows the report's shape: one workload, two clients
    out = _run(tmp_path, "--before", str(before), "--workloads", "poll", "--clients", "2")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    report = json.loads((tmp_path / "out" / "instructions-latest.json").read_text())
    assert report["clients"] == 2 and report["before"] == str(before)
    rows = {r["workload"]: r for r in report["rows"]}
    assert set(rows) == {"poll"}
    for workload, row in rows.items():
        assert row["ops"] >= 1
        # a request of our server runs hundreds of thousands of instructions; both sides
        # serve the same code here, so neither count is off by a factor
        assert row["before_ir"] > 10_000 and row["after_ir"] > 10_000, row
        assert 0.5 < row["ir_ratio"] < 2.0, row
        assert row["ir_ratio"] == pytest.approx(row["after_ir"] / row["before_ir"])
        if shutil.which("strace"):
            assert row["before_syscalls"] > 0 and row["after_syscalls"] > 0, (workload, row)
    md = (tmp_path / "out" / "instructions-latest.md").read_text()
    assert "callgrind, 2 clients" in md
    assert md.count("\n| poll |") == 1


def test_a_before_side_that_cannot_serve_is_named_and_nothing_written(tmp_path: Path) -> None:
    _valgrind()
    before = before_checkout(ROOT, tmp_path, 'raise SystemExit("the before checkout")\n')
    out = _run(tmp_path, "--before", str(before), "--workloads", "poll", "--clients", "1")
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-3000:]
    assert "bench_instructions: poll, before (" in out.stderr
    assert "did not start" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "out" / "instructions-latest.json").exists()


def test_bad_arguments_are_named(tmp_path: Path) -> None:
    out = _run(tmp_path, "--before", str(tmp_path))
    assert out.returncode == 2
    assert f"--before {tmp_path}: no generated/mcp_tasks/examples/server.py" in out.stderr
    out = _run(tmp_path, "--before", str(ROOT), "--clients", "0")
    assert out.returncode == 2 and "--clients: 0 (at least 1)" in out.stderr
    out = _run(tmp_path, "--before", str(ROOT), "--workloads", "poll,nope")
    assert out.returncode == 2 and "--workloads: unknown nope" in out.stderr
    no_valgrind = {**os.environ, "PATH": str(tmp_path)}  # sys.executable is absolute
    out = _run(tmp_path, "--before", str(ROOT), env=no_valgrind)
    assert out.returncode == 2 and "valgrind is not installed" in out.stderr
