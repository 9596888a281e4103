"""The example server under load on both faces while its store blinks (``outage_runs.py``:
Redis stopped for less and more than the lease, with and without persistence, two
instances; SQLite locked by another process), then every acknowledged task checked
exactly: nothing stuck, nothing failed for the store's sake (R-RESULT-1, X-GET-9), no
live instance failed by another, and every held ``tasks/result`` answered the real result
or "Task store unavailable" (R-ERR-1), never another error. Bounded counts, no timing
assertions."""

from __future__ import annotations

from pathlib import Path

import pytest

from testkit.doors import DEFAULT_DOOR
from testkit.outage_runs import RUNS, one_run
from testkit.redis_fixtures import redis_server_binary

pytestmark = [
    pytest.mark.slow,
    pytest.mark.door_agnostic,
]  # store outages: the door is not what is tested (testkit.doors)


#: each Redis run's two instances take one front door each; the SQLite run, the shipped one
CASES = [
    *((run, "both") for run in RUNS if run.startswith("redis")),
    ("sqlite-lock", DEFAULT_DOOR),
]


@pytest.mark.parametrize(("run", "doors"), CASES)
def test_outage_run_loses_nothing_and_leaves_nothing_stuck(
    run: str, doors: str, tmp_path: Path
) -> None:
    if run.startswith("redis"):
        redis_server_binary()  # skips (or fails under CI) without redis-server
    counts = one_run(run, tmp_path, 6.0, None if doors == "both" else doors)
    print(counts.line())
    assert counts.acknowledged > 0
    assert counts.kept > 0, "no outcome ended during the blink: the run checked nothing"
    assert counts.stuck == 0 and counts.wrong == 0, counts.problems[:10]
    assert counts.failed_with_reason == 0, dict(counts.reasons)
    assert counts.held["other"] == 0, counts.problems[:10]
    if run == "redis-volatile":  # Redis restarted without persistence lost what it held
        assert counts.completed_exactly + counts.lost_with_the_store == counts.acknowledged
    else:
        assert counts.lost_with_the_store == 0
        assert counts.completed_exactly == counts.acknowledged
