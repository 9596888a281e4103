"""End-to-end benchmark against the peers, side by side. One command:

    .venv/bin/python benchmarks/peers_bench.py            # setup + full run (< 10 minutes)
    .venv/bin/python benchmarks/peers_bench.py --quick    # a few seconds, tiny sizes (tests)

Servers (each workload on a fresh process, bound to 127.0.0.1 on a free port):

- ``ts``: ``benchmarks/peers/ts/server.mjs``, @modelcontextprotocol/sdk 1.32.2 experimental
  tasks (``InMemoryTaskStore``, ``registerToolTask``), installed with ``npm ci``, as its users
  run it (the SDK's examples): on express from the SDK's ``createMcpExpressApp()``, whose
  ``express.json()`` parses the body that the route hands to ``transport.handleRequest(req,
  res, req.body)``, on the SDK's default response mode (SSE): the reference of every "× TS"
  target; ``ts-json``: the same with ``enableJsonResponse`` (``--json-response``), a labelled
  row; ``ts-raw``: on ``node:http`` with the raw request handed to the transport, which reads
  and parses the body itself (``--raw-request``, the setup of earlier figures; lifecycle,
  wake-up and poll), a labelled row; ``ts-parsed``: on ``node:http`` with the body read and
  ``JSON.parse``d by the app and handed to the transport (``--parsed-body``, no express;
  lifecycle, wake-up and poll), a labelled row;
- ``mcp129``: ``benchmarks/peers/mcp129/server.py`` on ``mcp==1.29.0`` experimental tasks, in
  its own virtualenv ``benchmarks/peers/.venv-mcp129`` (also holds matplotlib for the plots);
- ``floor``: ``benchmarks/peers/floor_server.py``, mcp 2.3 with the thinnest hand-written tasks:
  what the SDK's transport alone costs;
- ``ceiling``: ``benchmarks/peers/ceiling_server.py``, the thinnest 2025-11-25 tasks server as a
  raw ASGI app under uvicorn with its defaults (no SDK, no validation or limits, JSON
  responses): what Python on uvicorn can do here; lifecycle, wake-up and poll only, and our
  rows' ratio to it ("× ceiling");
- ``ours-memory`` / ``ours-sqlite`` (/ ``ours-redis`` when the runtime has a Redis store and
  ``redis-server`` is installed), and ``ours-h11`` (the memory store on uvicorn's h11
  parser and plain asyncio, ``--http-stack h11``, against the shipped default's httptools
  and uvloop; lifecycle, wake-up and poll only): our example server as users run it,
  ``python -m mcp_tasks.examples.server --http HOST:PORT [--store ...]``, with its shipped
  defaults (the SDK's SSE response mode among them) and one flag a user would pass:
  ``--rate-limit`` raised (``OURS_FLAGS``; the default, 1,000 task requests per requestor
  per 10 s, would cap polling at 100 gets/s per session). ``--max-active`` stays at its
  default (100 non-terminal tasks per requestor; no workload has more than 8).

On the 2026-07-28 tasks extension (``io.modelcontextprotocol/tasks``; stateless requests, the
driver's ``Stateless`` mode; lifecycle = task ``tools/call`` then ``tasks/get`` until
terminal, poll = a ``tasks/get`` loop; this face has no ``tasks/result`` and no
``tasks/list``, so no wake-up or list rows):

- ``fastmcp``: ``tests/testkit/fastmcp_server.py``, FastMCP 4.1.4 + fastmcp-tasks (Docket
  ``memory://``), in the virtualenv ``tests/interop/.venv-fastmcp`` the interop tests make
  (setup makes it too; ``--quick`` skips the peer when it is absent, except under ``CI``);
- ``ours-ext``: our example server on that face, shown as "–" while its ``server/discover``
  does not advertise the extension.

The driver (``benchmarks/peers/driver.py``) speaks raw JSON-RPC over Streamable HTTP on asyncio
streams; its own CPU per request is measured and reported, and server CPU per operation is
read from ``/proc/PID/stat``. Peers run in rotating order, ``--reps`` repetitions; the tables
show medians over repetitions and ratios to the TypeScript server taken within each one.

Writes ``benchmarks/results/peers-latest.{json,md}``, ``wakeup.png`` and ``list_pages.png``
(``--quick``: under ``benchmarks/results/tmp/``, plots only if matplotlib is importable).

This script runs the benchmark; its parts live in ``benchmarks/peers/``: the servers
(``servers.py``), the workloads and their sizes (``workloads.py``), the medians, targets and
tables (``report.py``), this machine's ports, processes and redis-server (``localhost.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PEERS = HERE / "peers"
RESULTS = HERE / "results"
README = HERE / "README.md"  # benchmarks/README.md: the tables live there
README_START, README_END = "<!-- peers-bench:start -->", "<!-- peers-bench:end -->"
sys.path.insert(0, str(PEERS))
sys.path.insert(0, str(ROOT / "tests"))  # testkit: the FastMCP peer's venv (fastmcp_peer)

import scaleout  # noqa: E402
from driver import RUN_FAILURES  # noqa: E402
from paired import pairs_of, run_paired  # noqa: E402
from report import aggregate, markdown, scale_targets, targets  # noqa: E402
from servers import (  # noqa: E402
    BEFORE,
    EXT,
    FASTMCP,
    OURS_FLAGS,
    PY129,
    REDIS,
    STORE_ROWS,
    TS_DIR,
    VENV129,
    Running,
    ServerSpec,
    before_specs,
    counted,
    server_specs,
)
from workloads import (  # noqa: E402
    EXT_WORKLOADS,
    QUICK,
    WORKLOADS,
    Plan,
    w_counts,
    w_list,
    workloads_of,
)

from testkit import fastmcp_peer  # noqa: E402


# --------------------------------------------------------------------------- setup
def run_cmd(argv: list[str], cwd: Path | None = None) -> None:
    print("$", " ".join(argv), flush=True)
    subprocess.run(argv, cwd=cwd, check=True)


def setup() -> None:
    """npm ci for the TypeScript peer; the mcp 1.29 + matplotlib virtualenv; FastMCP's."""
    fastmcp_peer.ensure_venv()
    stamp = TS_DIR / "node_modules" / ".package-lock.json"
    lock = TS_DIR / "package-lock.json"
    if not stamp.exists() or stamp.stat().st_mtime < lock.stat().st_mtime:
        run_cmd(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=TS_DIR)
    reqs = PEERS / "mcp129" / "requirements.txt"
    marker = VENV129 / ".installed"
    if not marker.exists() or marker.read_text() != reqs.read_text():
        if not PY129.exists():
            run_cmd([sys.executable, "-m", "venv", str(VENV129)])
        run_cmd([str(PY129), "-m", "pip", "install", "-q", "-r", str(reqs)])
        marker.write_text(reqs.read_text())


# --------------------------------------------------------------------------- run
async def run_one(
    spec: ServerSpec, workload: str, plan: Plan, tmp: Path, rep: int = 0
) -> dict[str, Any]:
    srv = await Running(spec, tmp).start()
    try:
        if workload == "list":
            return await w_list(srv, plan, rep)
        return await workloads_of(spec)[workload](srv, plan)
    finally:
        srv.stop()


async def run_all(
    specs: list[ServerSpec],
    plan: Plan,
    tmp: Path,
    pairs: list[tuple[ServerSpec, ServerSpec]] | None = None,
) -> dict[str, Any]:
    """Every spec's workloads in rotating repetitions, then ``pairs`` (``--before``) in
    alternating windows (``paired.py``)."""
    names = [s.name for s in specs]
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {
        w: {n: [] for n in names} for w in {**WORKLOADS, **EXT_WORKLOADS}
    }
    errors: list[str] = []
    if any(s.needs_redis for s in specs):
        await REDIS.start()
    try:
        await _run_reps(specs, plan, tmp, names, runs, errors)
        paired = await run_paired(pairs, plan, tmp, errors) if pairs else {}
        befores = [b for _, b in pairs or []]
        counts = await run_counts([*specs, *befores], plan, tmp, errors)
    finally:
        REDIS.stop()
    return {"runs": runs, "errors": errors, "paired": paired, "counts": counts}


async def run_counts(
    specs: list[ServerSpec], plan: Plan, tmp: Path, errors: list[str]
) -> dict[str, dict[str, Any]]:
    """The store rows' round trips (``workloads.w_counts``), each on a process of its own
    that counts them (``counted.py``), after the timed runs."""
    out: dict[str, dict[str, Any]] = {}
    for spec in specs:
        if spec.name.removesuffix(BEFORE) not in STORE_ROWS or spec.missing:
            continue
        srv = await Running(counted(spec, tmp), tmp).start()
        try:
            out[spec.name] = res = await w_counts(srv, plan)
            print(f"counts    {spec.name:18s} " + count_summary(res), flush=True)
        except RUN_FAILURES as exc:
            errors.append(f"counts {spec.name}: {exc}")
            print("  ERROR", errors[-1], flush=True)
        finally:
            srv.stop()
    return out


def count_summary(res: dict[str, Any]) -> str:
    parts = []
    for what in ("lifecycle", "get"):
        c = res[what]
        if c.get("pipelines") or c.get("commands"):
            parts.append(
                f"{what}: {c['pipelines']:.2f} round trips, {c['commands']:.2f} commands sent,"
                f" {c.get('redis_ran', 0):.1f} run by Redis"
            )
        else:
            parts.append(f"{what}: {c['commits']:.2f} commits, {c['statements']:.2f} statements")
    return "; ".join(parts)


async def _run_reps(
    specs: list[ServerSpec],
    plan: Plan,
    tmp: Path,
    names: list[str],
    runs: dict[str, dict[str, list[dict[str, Any]]]],
    errors: list[str],
) -> None:
    for rep in range(plan.reps):
        order = names[rep % len(names) :] + names[: rep % len(names)]
        if plan.fresh_process:
            for workload in {**WORKLOADS, **EXT_WORKLOADS}:
                if workload == "list" and rep >= plan.list_reps:
                    continue
                for name in order:
                    spec = next(s for s in specs if s.name == name)
                    if workload not in workloads_of(spec):
                        continue
                    t0 = time.perf_counter()
                    try:
                        res = await run_one(spec, workload, plan, tmp, rep)
                    except RUN_FAILURES as exc:
                        errors.append(f"rep {rep} {workload} {name}: {exc}")
                        print("  ERROR", errors[-1], flush=True)
                        continue
                    runs[workload][name].append(res)
                    print(
                        f"rep {rep} {workload:9s} {name:12s} {time.perf_counter() - t0:5.1f}s "
                        + summary(workload, res),
                        flush=True,
                    )
        else:  # quick: one process per server for every workload
            for name in order:
                spec = next(s for s in specs if s.name == name)
                try:
                    await _run_quick(spec, plan, tmp, runs)
                except RUN_FAILURES as exc:
                    errors.append(f"rep {rep} {name}: {exc}")
                    print("  ERROR", errors[-1], flush=True)


async def _run_quick(
    spec: ServerSpec, plan: Plan, tmp: Path, runs: dict[str, dict[str, list[dict[str, Any]]]]
) -> None:
    """Every workload of ``spec`` on one process of it (``--quick``)."""
    srv = await Running(spec, tmp).start()
    try:
        for workload, fn in workloads_of(spec).items():
            runs[workload][spec.name].append(await fn(srv, plan))
            print(
                f"{workload:9s} {spec.name:12s} " + summary(workload, runs[workload][spec.name][-1])
            )
    finally:
        srv.stop()


def summary(workload: str, r: dict[str, Any]) -> str:
    if "not_served" in r:
        return f"not served ({r['not_served']})"
    workload = workload.removeprefix("ext_")
    if workload == "lifecycle":
        return f"{r['tasks_per_s']:.0f} tasks/s p99 {r['p99_ms']:.1f} ms cpu {r['server_cpu_ms_per_task']:.3f} ms/task"
    if workload == "wakeup":
        return f"late p50 {r['p50_ms']:.1f} p99 {r['p99_ms']:.1f} ms"
    if workload == "poll":
        return f"{r['gets_per_s']:.0f} gets/s cpu {r['server_cpu_us_per_get']:.0f} us/get"
    pts = r["points"]
    return (
        " ".join(
            f"N={n}: page {p['first_page_ms']:.2f} ms walk {p['walk_ms']:.0f} ms"
            for n, p in pts.items()
        )
        + f" | {r['bytes_per_task']:.0f} B/task"
    )


# --------------------------------------------------------------------------- report
def machine() -> dict[str, Any]:
    cpu = platform.processor()
    with contextlib.suppress(OSError):
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "node": (
            subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
            if shutil.which("node")
            else None
        ),
        "loadavg_before": os.getloadavg(),
    }


def plot(json_path: Path, out_dir: Path) -> list[str]:
    """Draw the PNGs with matplotlib from the benchmark virtualenv (or this one)."""
    script = PEERS / "plot.py"
    for py in (PY129, Path(sys.executable)):
        if not py.exists():
            continue
        probe = subprocess.run([str(py), "-c", "import matplotlib"], capture_output=True)
        if probe.returncode == 0:
            done = subprocess.run(
                [str(py), str(script), str(json_path), str(out_dir)], capture_output=True, text=True
            )
            if done.returncode != 0:
                print(done.stderr, file=sys.stderr)
                return []
            return done.stdout.split()
    print("matplotlib not available: no plots", file=sys.stderr)
    return []


def update_readme(md: str) -> bool:
    """Put the tables and the plots between the peers-bench markers of benchmarks/README.md."""
    text = README.read_text()
    if README_START not in text or README_END not in text:
        print(f"{README} has no peers-bench markers: not updated", file=sys.stderr)
        return False
    head, rest = text.split(README_START, 1)
    _, tail = rest.split(README_END, 1)
    plots = (
        "\n![tasks/result lateness after slow_compute(0.5) ends]"
        "(results/wakeup.png)\n\n"
        "![tasks/list first page and whole walk against retained tasks]"
        "(results/list_pages.png)\n"
    )
    README.write_text(head + README_START + "\n" + md + plots + README_END + tail)
    return True


def run_scale(args: argparse.Namespace, tmp: Path, errors: list[str]) -> list[dict[str, Any]]:
    """Scale-out rows (``benchmarks/peers/scaleout.py``): the example server on Redis with
    1 and then 2 workers behind one port; empty without ``redis-server`` or when
    ``--servers`` leaves it out."""
    if args.servers and "scaleout" not in args.servers.split(","):
        return []
    if shutil.which("redis-server") is None:
        return []
    try:
        return asyncio.run(scaleout.scaleout(args.quick, log_dir=tmp / "scaleout"))
    except Exception as exc:  # reported with the rest, the other rows stand
        errors.append(f"scaleout: {type(exc).__name__}: {exc}")
        return []


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a few seconds, tiny sizes (tests)")
    ap.add_argument("--skip-setup", action="store_true", help="no npm ci / pip install")
    ap.add_argument("--reps", type=int)
    ap.add_argument(
        "--servers",
        help="comma-separated subset of ts,ts-json,ts-raw,ts-parsed,mcp129,floor,floor-sdk,ceiling,"
        "ours-memory,ours-h11,ours-sqlite,ours-redis,fastmcp,ours-ext,scaleout",
    )
    ap.add_argument(
        "--before",
        type=Path,
        metavar="CHECKOUT",
        help="also serve ours-memory, ours-ext, ours-sqlite and ours-redis from CHECKOUT's"
        " generated/ (e.g. a git worktree of an earlier commit), in pairs of alternating"
        " windows with this checkout's (benchmarks/peers/paired.py), and count the store"
        " rows' round trips on both: before/after tables",
    )
    ap.add_argument("--pairs", type=int, help="--before's pairs of windows per workload")
    ap.add_argument("--out", type=Path, help="results directory")
    ap.add_argument(
        "--update-readme",
        action="store_true",
        help="write the tables into benchmarks/README.md's markers",
    )
    args = ap.parse_args(argv)
    if args.pairs is not None and args.pairs < 1:
        ap.error(f"--pairs: {args.pairs} (at least 1)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    plan = QUICK if args.quick else Plan()
    if args.reps:
        plan.reps = args.reps
    if args.pairs is not None:
        plan.pairs = args.pairs
    out_dir = args.out or (RESULTS / "tmp" if args.quick else RESULTS)
    out_dir.mkdir(parents=True, exist_ok=True)
    if not args.quick and not args.skip_setup:
        setup()
    elif os.environ.get("CI") and (not args.servers or FASTMCP in args.servers.split(",")):
        fastmcp_peer.ensure_venv()  # CI measures the FastMCP peer even in --quick
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="peers-bench-") as d:
        tmp = Path(d)
        specs = server_specs(tmp, args.quick)
        if args.servers:
            wanted = args.servers.split(",")
            specs = [s for s in specs if s.name in wanted]
        pairs: list[tuple[ServerSpec, ServerSpec]] = []
        if args.before is not None:
            try:
                pairs = pairs_of(specs + before_specs(specs, args.before))
            except ValueError as exc:
                print(exc, file=sys.stderr)
                return 2
        runnable = [s for s in specs if s.missing is None]
        for s in specs:
            if s.missing:
                print(f"skipping {s.name}: {s.missing}", file=sys.stderr)
        if not runnable:
            print("no server to run: every one asked for is missing", file=sys.stderr)
            return 2
        info = machine()
        result = asyncio.run(run_all(runnable, plan, tmp, pairs))
        scale = run_scale(args, tmp, result["errors"])
        logs = {p.name: p.read_text()[-2000:] for p in tmp.glob("*.log") if p.stat().st_size}
    names = [s.name for s in runnable]
    agg = aggregate(result["runs"], names)
    plan_d = {k: (list(v) if isinstance(v, tuple) else v) for k, v in plan.__dict__.items()}
    report: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": info,
        "loadavg_after": os.getloadavg(),
        "plan": plan_d,
        "quick": args.quick,
        "seconds": time.perf_counter() - started,
        "servers": [
            {"name": s.name, "label": s.label, "missing": s.missing, "face": s.face} for s in specs
        ],
        "runs": result["runs"],
        "paired": result["paired"],
        "counts": result["counts"],
        "errors": result["errors"],
        "server_logs_tail": logs,
        "aggregate": agg,
        "ours_flags": list(OURS_FLAGS),
        "before": None if args.before is None else str(args.before),
        "scaleout": scale,
    }
    report["targets"] = targets(agg, plan, {s.name for s in specs if s.face == EXT})
    report["targets"] += scale_targets(scale)
    json_path = out_dir / "peers-latest.json"
    json_path.write_text(json.dumps(report, indent=1, default=str))
    md = markdown(report)
    (out_dir / "peers-latest.md").write_text(md)
    pngs = plot(json_path, out_dir)
    if args.update_readme and not args.quick and out_dir == RESULTS and args.before is None:
        update_readme(md)
    print(md)
    print(
        f"wrote {json_path}, {out_dir / 'peers-latest.md'} {' '.join(pngs)} in {report['seconds']:.0f} s"
    )
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
