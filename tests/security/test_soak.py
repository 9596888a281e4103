"""The soak test in its CI form: mixed traffic from 50 sessions, 10 s through each front door,
tasks with a 5 s ttl (the whole soak runs once per door, each with a third less traffic
than the single 30 s run it replaces and half its ttl, whose expiry the soak waits for
twice: the suite's time stays in bounds).

Longer (seconds per door): ``MCPTASK_SOAK_SECONDS=600 .venv/bin/python -m pytest tests/security/test_soak.py``
or ``PYTHONPATH=tests .venv/bin/python -m testkit.soak`` (10 minutes by default).
"""

from __future__ import annotations

import os
from pathlib import Path

from testkit.sec_harness import SOAK_REPORT
from testkit.soak import ENV_SECONDS, format_report, run_soak

CI_SECONDS = 10.0  # per front door
CI_TTL_MS = 5_000
#: RSS may stay a little above the baseline (allocator high-water marks), never grow with load
MEMORY_SLACK_KB = 24 * 1024


def test_soak(tmp_path: Path, front_door: str) -> None:
    seconds = float(os.environ.get(ENV_SECONDS, CI_SECONDS))
    report = run_soak(
        seconds, sessions=50, ttl_ms=CI_TTL_MS, log_dir=tmp_path, front_door=front_door
    )
    line = format_report(report)
    SOAK_REPORT.append(line)
    print(line)
    assert report["server_alive"]
    assert report["problem_count"] == 0, report["problems"]
    assert report["lost"] == 0 and report["fetched_twice"] == 0, report
    kinds = report["verified"]
    for kind in ("slow_compute", "failing_job", "input_required", "cancelled", "list"):
        assert kinds.get(kind, 0) > 0, kinds
    assert report["left_after_expiry"] == 0, "tasks outlived their ttl"
    assert report["rss_end_kb"] <= report["rss_start_kb"] + MEMORY_SLACK_KB, line
    assert report["server_log_tracebacks"] == 0
