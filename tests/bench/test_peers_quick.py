"""Keep benchmarks/peers_bench.py working: its --quick mode, end to end (no timing assertions).

Runs our example server as shipped (memory and SQLite stores), the floor and the raw-ASGI
ceiling servers, plus the TypeScript and mcp 1.29 peers when their setup (``npm ci``, the
benchmark virtualenv) is present, and on the 2026-07-28 tasks extension face FastMCP 4 (when its virtualenv is there; under ``CI`` the
benchmark makes it) and our server's row ("–" while the face is not served).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from testkit.procs import before_checkout

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "peers_bench.py"


def test_peers_bench_quick(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    report = json.loads((tmp_path / "peers-latest.json").read_text())
    assert report["quick"] is True and not report["errors"]
    agg = report["aggregate"]
    for name in ("floor", "ours-memory", "ours-sqlite"):
        row = agg[name]
        assert row["lifecycle.tasks_per_s"] > 0
        assert row["lifecycle.server_cpu_ms_per_task"] is not None
        assert row["lifecycle.driver_cpu_us_per_req"] is not None
        assert row["poll.gets_per_s"] > 0
        assert row["wakeup.p99_ms"] is not None
        assert row["memory.bytes_per_task"] is not None
        sizes = [str(n) for n in report["plan"]["list_sizes"]]
        for n in sizes:
            assert row[f"list.{n}.walk_tasks"] >= int(n)  # every retained task is listed
            assert row[f"list.{n}.first_page_ms"] is not None
    # the big-N row: tasks written into the SQLite file through a second store instance;
    # the in-memory store has no such row
    big = report["plan"]["big_list"]
    assert agg["ours-sqlite"][f"list.{big}.walk_tasks"] >= big
    assert agg["ours-memory"].get(f"list.{big}.walk_tasks") is None
    # the raw-ASGI ceiling: lifecycle, wake-up and poll rows, and our ratio to it
    ceiling = agg["ceiling"]
    assert ceiling["lifecycle.tasks_per_s"] > 0 and ceiling["poll.gets_per_s"] > 0
    assert ceiling["lifecycle.x_ceiling"] == 1.0 and ceiling["wakeup.p99_ms"] is not None
    assert f"list.{report['plan']['list_sizes'][0]}.first_page_ms" not in ceiling
    assert (
        agg["ours-memory"]["lifecycle.x_ceiling"] > 0 and agg["ours-memory"]["poll.x_ceiling"] > 0
    )
    # our server on both HTTP stacks in the same run: httptools + uvloop (the shipped
    # default) and h11 + asyncio (--http-stack h11)
    h11 = agg["ours-h11"]
    assert h11["lifecycle.tasks_per_s"] > 0 and h11["poll.gets_per_s"] > 0
    assert h11["lifecycle.x_ceiling"] > 0
    ran = {s["name"] for s in report["servers"] if not s["missing"]}
    assert {"floor", "ceiling", "ours-memory", "ours-sqlite"} <= ran <= set(agg)
    if "ts" in agg:
        assert agg["ts"]["lifecycle.x_ts"] == 1.0
    assert {t["server"] for t in report["targets"]} >= {"ours-memory", "ours-sqlite"}
    # the store rows' round trips, counted on a server of their own: a lifecycle writes
    # (at least one commit); a tasks/get of a task that ended reads at most once
    counts = report["counts"]["ours-sqlite"]
    assert counts["lifecycle"]["commits"] >= 1 and counts["lifecycle"]["statements"] >= 2
    assert counts["get"]["statements"] <= 1
    if "ours-redis" in report["counts"]:
        redis = report["counts"]["ours-redis"]["lifecycle"]
        assert redis["pipelines"] >= 1 and redis["commands"] >= redis["pipelines"]
        assert redis["redis_ran"] >= redis["commands"]
    md = (tmp_path / "peers-latest.md").read_text()
    for needle in ("**Lifecycle**", "**Wake-up**", "**List**", "**Memory**", "**Targets**"):
        assert needle in md
    assert "**Stores**" in md
    # the extension face: our row is measured once served, else shown as not served
    assert "**Extension face**" in md
    ours_ext = agg["ours-ext"]
    assert (
        ours_ext.get("ext_lifecycle.tasks_per_s", 0) > 0 or "ext_lifecycle.not_served" in ours_ext
    )
    # the extension face is held to the TypeScript server's 2025-11-25 figures
    ext_targets = [t for t in report["targets"] if t["server"] == "ours-ext"]
    assert ext_targets and all("TS" in t["target"] for t in ext_targets)
    if "fastmcp" in ran:
        assert agg["fastmcp"]["ext_lifecycle.tasks_per_s"] > 0
        assert agg["fastmcp"]["ext_poll.gets_per_s"] > 0
        assert agg["fastmcp"]["ext_lifecycle.x_fastmcp"] == 1.0


def _before_checkout(tmp_path: Path, server_py: str | None = None) -> Path:
    return before_checkout(BENCH.parents[1], tmp_path, server_py)


def _quick_before(tmp_path: Path, checkout: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--out", str(tmp_path / "out"),
         "--servers", "ours-memory,ours-ext", "--before", str(checkout)],
        capture_output=True,
        text=True,
        timeout=240,
    )  # fmt: skip


def test_before_rows_measure_the_same_servers_from_another_checkout(tmp_path: Path) -> None:
    out = _quick_before(tmp_path, _before_checkout(tmp_path))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    report = json.loads((tmp_path / "out" / "peers-latest.json").read_text())
    paired, pairs = report["paired"], report["plan"]["pairs"]
    # lifecycle and poll only, each side measured once per pair, in pairs
    assert set(paired) == {"lifecycle", "poll", "ext_lifecycle", "ext_poll"}
    for workload, by_name in paired.items():
        assert len(by_name) == 2, by_name.keys()
        for name, results in by_name.items():
            assert len(results) == pairs, (workload, name)
            rate = "tasks_per_s" if "lifecycle" in workload else "gets_per_s"
            assert all(r[rate] > 0 for r in results), (workload, name)
    assert "ours-memory@before" in paired["poll"] and "ours-ext@before" in paired["ext_poll"]
    # the before rows are a comparison: no row of the peer tables, never held to the targets
    assert not [n for n in report["aggregate"] if "@before" in n]
    assert not [t for t in report["targets"] if "@before" in t["server"]]
    md = (tmp_path / "out" / "peers-latest.md").read_text()
    table = md.split("**Before and after**")[1].split("\n\n")[1]
    assert table.count("\n| ours-") == 4, table  # lifecycle and poll on each face


def test_before_rows_run_the_other_checkouts_code(tmp_path: Path) -> None:
    """The ``--before`` rows import the package from that checkout: one whose example server
    exits at once fails those rows (named), and only those."""
    checkout = _before_checkout(tmp_path, 'raise SystemExit("the before checkout")\n')
    out = _quick_before(tmp_path, checkout)
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-3000:]
    report = json.loads((tmp_path / "out" / "peers-latest.json").read_text())
    assert report["errors"] and all("@before" in e for e in report["errors"])
    assert report["aggregate"]["ours-memory"]["lifecycle.tasks_per_s"] > 0


def test_before_names_a_checkout_without_generated_code(tmp_path: Path) -> None:
    out = _quick_before(tmp_path, tmp_path)
    assert out.returncode == 2
    assert f"--before {tmp_path}: no generated/mcp_tasks/examples/server.py" in out.stderr


def test_pairs_below_one_are_refused(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--out", str(tmp_path), "--pairs", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "--pairs: 0 (at least 1)" in out.stderr, out.stderr
