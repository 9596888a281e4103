"""Task work on worker processes: lifecycle throughput and wake-up latency with the work in
the front end and on 1 and 2 workers, and CPU-bound work (50 ms of CPU a task) the same ways.

    .venv/bin/python benchmarks/bench_workers.py                     # 2 x 5 s per row
    .venv/bin/python benchmarks/bench_workers.py --baseline-rev main # + the in-process path of `main`
    .venv/bin/python benchmarks/bench_workers.py --baseline-rev main --in-process-only --reps 5
    .venv/bin/python benchmarks/bench_workers.py --quick             # a few seconds (tests)

One throw-away ``redis-server``; per row a fresh Redis namespace, one front end (HTTP,
stateless, bearer tokens) and 0, 1 or 2 workers (``python -m mcp_tasks.worker``), each a
process of its own. Each client (``peers/driver.py``'s raw HTTP/1.1 ``Session``) loops the
lifecycle: a task-augmented ``tools/call``, then ``tasks/result``, which blocks until the
task ends and is woken by the store's change event: the lifecycle's latency is the wake-up
latency a client sees.

- lifecycle rows: the example server's ``slow_compute`` with ``seconds=0`` (in-process, or
  ``--on-workers``); ``--baseline-rev REV`` adds the in-process row of the code at git
  revision REV (its ``generated/`` first on ``PYTHONPATH``), measured in the same run.
- CPU rows: ``workers_app.py``'s ``burn``, 50 ms of CPU a task.

Reported per row (medians over repetitions): tasks/s, lifecycle p50/p99 (ms), and the CPU
used (cores) by the front end, the workers and ``redis-server``.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE / "peers"))

from driver import Session  # noqa: E402
from localhost import free_port, stop  # noqa: E402
from scaleout import (  # noqa: E402
    ScalePlan,
    accepts,
    bench_parser,
    cpu_s,
    drop_load,
    measure_window,
    redis_server,
    report,
)

HOST = "127.0.0.1"
LIMITS = ["--rate-limit", "1000000000/10", "--max-active", "100000"]
TTL_MS = 60_000


@dataclass
class Plan(ScalePlan):
    """The scale-out plan, and fewer clients for the CPU-bound tool."""

    cpu_clients: int = 4


QUICK = Plan(clients=2, cpu_clients=2, reps=1, warmup_s=0.3, window_s=1.0)


@dataclass
class Row:
    name: str
    workload: str  # "lifecycle" | "cpu"
    workers: int  # 0: the work runs in the front end
    pythonpath: str | None = None  # another revision's generated/ first


def _env(pythonpath: str | None) -> dict[str, str]:
    import os

    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return env


class Stack:
    """One row's front end and workers."""

    def __init__(self, row: Row, redis_port: int, tokens: Path, logs: Path) -> None:
        self.row = row
        self.ns = "bench-" + uuid.uuid4().hex[:8]
        self.store = f"redis://{HOST}:{redis_port}/0?namespace={self.ns}"
        self.port = free_port()
        self.tokens = tokens
        self.logs = logs
        self.front: subprocess.Popen[bytes] | None = None
        self.workers: list[subprocess.Popen[bytes]] = []
        self.worker_logs: list[Path] = []

    def _spawn(self, argv: list[str], log: Path, cwd: Path = REPO) -> subprocess.Popen[bytes]:
        with open(log, "ab") as out:
            return subprocess.Popen(
                argv, cwd=cwd, env=_env(self.row.pythonpath), stdout=out,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )  # fmt: skip

    async def start(self) -> Stack:
        row, py = self.row, sys.executable
        on = row.workers > 0
        if row.workload == "lifecycle":
            argv = [py, "-m", "mcp_tasks.examples.server", "--http", f"{HOST}:{self.port}"]
            argv += ["--stateless", "--tokens", str(self.tokens), "--store", self.store, *LIMITS]
            argv += ["--on-workers"] if on else []
            app, cwd = "mcp_tasks.examples.server:worker_app", REPO
        else:
            argv = [py, str(HERE / "workers_app.py"), str(self.port), self.store, str(self.tokens)]
            argv += ["--on-workers"] if on else []
            app, cwd = "workers_app:build", HERE
        self.front = self._spawn(argv, self.logs / f"front-{self.ns}.log")
        for i in range(row.workers):
            log = self.logs / f"worker-{self.ns}-{i}.log"
            wargv = [py, "-m", "mcp_tasks.worker", "--store", self.store, "--concurrency", "20"]
            self.workers.append(self._spawn([*wargv, app], log, cwd))
            self.worker_logs.append(log)
        deadline = time.monotonic() + 120
        while not await self._ready():
            if self.front.poll() is not None or any(w.poll() is not None for w in self.workers):
                raise RuntimeError(f"{row.name}: a process exited early; see {self.logs}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{row.name}: did not start; see {self.logs}")
            await asyncio.sleep(0.2)
        return self

    async def _ready(self) -> bool:
        if not all("running jobs from" in p.read_text(errors="replace") for p in self.worker_logs):
            return False
        return await accepts(self.port)

    def pids(self) -> dict[str, list[int]]:
        assert self.front is not None
        return {"front": [self.front.pid], "workers": [w.pid for w in self.workers]}

    def stop(self) -> None:
        for w in self.workers:
            stop(w)
        stop(self.front)


async def _lifecycle(s: Session, tool: str, args: dict[str, Any], conn: int) -> None:
    params = {"name": tool, "arguments": args, "task": {"ttl": TTL_MS}}
    created = await s.call("tools/call", params, conn)
    await s.call("tasks/result", {"taskId": created["task"]["taskId"]}, conn)


def _pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q / 100 * (len(s) - 1))))] if s else float("nan")


async def measure(
    stack: Stack, redis_pid: int, plan: Plan, tokens: Sequence[str]
) -> dict[str, Any]:
    cpu = stack.row.workload == "cpu"
    tool, args = ("burn", {"label": "b"}) if cpu else ("slow_compute", {"seconds": 0})
    clients = tokens[: plan.cpu_clients if cpu else plan.clients]
    sessions = [await Session(HOST, stack.port, token=t).open(1) for t in clients]
    state = {"measure": False, "stop": False}
    lat: list[float] = []

    async def client(s: Session) -> None:
        while not state["stop"]:
            t0 = time.perf_counter()
            await _lifecycle(s, tool, args, 0)
            if state["measure"]:
                lat.append(time.perf_counter() - t0)

    jobs = [asyncio.create_task(client(s)) for s in sessions]
    try:
        await asyncio.sleep(plan.warmup_s)
        pids = stack.pids()
        every = [*pids["front"], *pids["workers"], redis_pid]
        c0 = {p: cpu_s(p) for p in every}
        wall = await measure_window(state, plan.window_s)
        used = {p: cpu_s(p) - c0[p] for p in every}
        state["stop"] = True
        await asyncio.gather(*jobs)
    finally:
        drop_load(jobs, sessions)
    return {
        "tasks_per_s": len(lat) / wall,
        "p50_ms": _pct(lat, 50) * 1e3,
        "p99_ms": _pct(lat, 99) * 1e3,
        "front_cpu": sum(used[p] for p in pids["front"]) / wall,
        "workers_cpu": sum(used[p] for p in pids["workers"]) / wall,
        "redis_cpu": used[redis_pid] / wall,
        "tasks": len(lat),
    }


def _baseline(rev: str, into: Path) -> str:
    """The ``generated/`` of git revision ``rev``, unpacked into ``into``."""
    archive = subprocess.run(
        ["git", "archive", rev, "generated"], cwd=REPO, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return str(into / "generated")


async def run(
    plan: Plan, baseline_rev: str | None, in_process_only: bool = False
) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="bench-workers-") as tmp:
        logs = Path(tmp)
        tokens = [f"tok-{i}" for i in range(max(plan.clients, plan.cpu_clients))]
        tokens_file = logs / "tokens.json"
        tokens_file.write_text(json.dumps({t: f"user-{t}" for t in tokens}))
        rows: list[Row] = []
        if baseline_rev:
            base = _baseline(baseline_rev, logs)
            rows.append(Row(f"in-process ({baseline_rev})", "lifecycle", 0, base))
        rows.append(Row("in-process", "lifecycle", 0))
        if not in_process_only:
            rows += [
                Row("1 worker", "lifecycle", 1),
                Row("2 workers", "lifecycle", 2),
                Row("in-process", "cpu", 0),
                Row("1 worker", "cpu", 1),
                Row("2 workers", "cpu", 2),
            ]
        reps: list[list[dict[str, Any]]] = [[] for _ in rows]
        with redis_server(logs / "redis.log") as (redis_proc, redis_port):
            await asyncio.sleep(0.3)
            for _ in range(plan.reps):  # the rows in turn each repetition: drift hits all
                for row, got in zip(rows, reps, strict=True):
                    stack = await Stack(row, redis_port, tokens_file, logs).start()
                    try:
                        got.append(await measure(stack, redis_proc.pid, plan, tokens))
                    finally:
                        stack.stop()
        out: list[dict[str, Any]] = []
        for row, got in zip(rows, reps, strict=True):
            med = {k: statistics.median(r[k] for r in got) for k in got[0]}
            out.append({"workload": row.workload, "row": row.name, "reps": plan.reps, **med})
        return out


def markdown(rows: list[dict[str, Any]]) -> str:
    head = (
        "| workload | work | tasks/s | p50 ms | p99 ms | front end CPU | workers CPU"
        " | Redis CPU |\n|---|---|---:|---:|---:|---:|---:|---:|"
    )
    lines = [head]
    for r in rows:
        lines.append(
            f"| {r['workload']} | {r['row']} | {r['tasks_per_s']:.0f} | {r['p50_ms']:.1f}"
            f" | {r['p99_ms']:.1f} | {r['front_cpu']:.2f} | {r['workers_cpu']:.2f}"
            f" | {r['redis_cpu']:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--baseline-rev", help="also the in-process row of this git revision")
    parser.add_argument(
        "--in-process-only", action="store_true", help="the in-process lifecycle rows alone"
    )
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else Plan()
    if args.reps:
        plan.reps = args.reps
    if args.window:
        plan.window_s = args.window
    rows = asyncio.run(run(plan, args.baseline_rev, args.in_process_only))
    return report(markdown(rows), rows, args.json)


if __name__ == "__main__":
    sys.exit(main())
