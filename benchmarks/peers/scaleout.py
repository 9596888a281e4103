"""Scale-out: the example server with 1 and then 2 workers on one Redis, lifecycle tasks/s.

    .venv/bin/python benchmarks/peers/scaleout.py            # 8 clients, 2 x 5 s per worker count
    .venv/bin/python benchmarks/peers/scaleout.py --quick    # a few seconds (tests)

Starts a throw-away ``redis-server`` and, for each worker count, the example server as a
user runs it behind one port::

    python -m mcp_tasks.examples.server --http 127.0.0.1:PORT --workers N --stateless \\
        --tokens FILE --store redis://127.0.0.1:RPORT/0?namespace=NS \\
        --rate-limit 1000000000/10 --max-active 100000

(a fresh process and a fresh Redis namespace per measurement; ``--workers 1`` is the
plain single process). Each of the clients (``benchmarks/peers/driver.py``'s ``Session``:
raw HTTP/1.1, ``CONNECTIONS`` keep-alive connections used in turn, one per lifecycle, a
bearer token of its own, no session id) loops the lifecycle: task-augmented ``tools/call`` of ``slow_compute`` with ``seconds=0``,
``tasks/get`` until the task is terminal (``POLL_PAUSE_S`` between two), then
``tasks/result``. The kernel picks the worker of each connection, so the load may be
spread unevenly (two connections per client make a lopsided split, such as all on one
worker, rarer); each worker's share of the workers' CPU is reported to show it.

Reported per worker count (medians over repetitions): tasks/s, requests/s, latency
p50/p99 of a whole lifecycle, ``tasks/get`` per task, server CPU per task (workers, parent
and ``redis-server``), CPU use (cores) of the workers, of Redis, of the driver and of
every other process on the machine (from ``/proc/stat``: on a shared machine the workers
compete with it), each worker's CPU share, and the ratio of tasks/s to one worker's (``x_1_worker``, from the medians).

Reading the ratio: two workers can only double what one does with two cores to
themselves. Here the driver and ``redis-server`` run on the same cores (and, on a shared
machine, whatever else does: the "other processes" column), and a worker at half the load
spends more CPU per task than one at full load (fewer requests per event-loop turn; run
``--workers 1 --clients 4`` to see it), so on 2 cores the ratio stays well below 2.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import localhost  # noqa: E402
from driver import TERMINAL, Session  # noqa: E402
from localhost import HOST, TICK_S, free_port, pct, redis_command  # noqa: E402

SERVER_MODULE = "mcp_tasks.examples.server"
POLL_PAUSE_S = 0.005  # between two tasks/get of one task
LIMITS = ["--rate-limit", "1000000000/10", "--max-active", "100000"]  # raised, as a user would
TTL_MS = 60_000
CONNECTIONS = 2  # per client
STOP_GRACE_S = 20  # SIGTERM, then SIGKILL after this long


@dataclass
class ScalePlan:
    """Clients, repetitions and the measuring window of each worker count."""

    clients: int = 8
    reps: int = 2
    warmup_s: float = 1.0
    window_s: float = 5.0


QUICK = ScalePlan(clients=4, reps=1, warmup_s=0.2, window_s=0.6)


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (0 once it is gone)."""
    try:
        return localhost.cpu_s(pid)
    except OSError:
        return 0.0


def machine_busy_s() -> float:
    """CPU seconds the whole machine spent busy (all cores, from /proc/stat)."""
    with open("/proc/stat") as fh:
        fields = [int(v) for v in fh.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) * TICK_S


def children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                with open(f"/proc/{entry}/stat") as fh:
                    if int(fh.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(entry))
    return sorted(out)


@contextlib.contextmanager
def redis_server(log: Path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    if shutil.which("redis-server") is None:
        raise RuntimeError("redis-server is not installed")
    port = free_port()
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            localhost.redis_argv(port),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        yield proc, port
    finally:
        localhost.stop(proc, STOP_GRACE_S)


class Server:
    """The example server with ``workers`` workers; its processes and their CPU."""

    def __init__(self, workers: int, redis_port: int, tokens: Path, log: Path, ns: str) -> None:
        self.workers, self.redis_port, self.ns = workers, redis_port, ns
        self.port = free_port()
        store = f"redis://{HOST}:{redis_port}/0?namespace={ns}"
        self.argv = [sys.executable, "-m", SERVER_MODULE, "--http", f"{HOST}:{self.port}"]
        self.argv += ["--workers", str(workers), "--stateless", "--tokens", str(tokens)]
        self.argv += ["--store", store, *LIMITS]
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None
        self.worker_pids: list[int] = []

    async def start(self) -> Server:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                self.argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        deadline = time.monotonic() + 90
        while not await self._ready():
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited early; see {self.log}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"server did not start; see {self.log}")
            await asyncio.sleep(0.1)
        self.worker_pids = [self.proc.pid] if self.workers == 1 else children(self.proc.pid)
        return self

    async def _ready(self) -> bool:
        """Every worker's store heartbeats in Redis, and the port accepts connections."""
        reply = await redis_command(self.redis_port, "ZCARD", f"{self.ns}:instances")
        if not reply.startswith(b":") or int(reply[1:]) < self.workers:
            return False
        return await accepts(self.port)

    def pids(self) -> list[int]:
        assert self.proc is not None
        return sorted({self.proc.pid, *self.worker_pids})

    def stop(self) -> None:
        localhost.stop(self.proc, STOP_GRACE_S)


async def _lifecycle(s: Session, conn: int) -> int:
    """One task on connection ``conn``: create, ``tasks/get`` until terminal,
    ``tasks/result``; the gets it took."""
    task = await s.task_call(0, conn, ttl=TTL_MS)
    params = {"taskId": task["taskId"]}
    gets = 0
    while True:
        gets += 1
        got = await s.call("tasks/get", params, conn)
        if got["status"] in TERMINAL:
            break
        await asyncio.sleep(POLL_PAUSE_S)
    await s.call("tasks/result", params, conn)
    return gets


async def measure(
    srv: Server, redis_pid: int, plan: ScalePlan, tokens: Sequence[str]
) -> dict[str, Any]:
    """``plan.clients`` clients looping the lifecycle; the rates of one window."""
    sessions = [await Session(HOST, srv.port, token=t).open(CONNECTIONS) for t in tokens]
    state = {"measure": False, "stop": False}
    lat: list[float] = []
    gets: list[int] = []

    async def client(s: Session) -> None:
        turn = 0
        while not state["stop"]:
            turn += 1
            t0 = time.perf_counter()
            n = await _lifecycle(s, turn % CONNECTIONS)
            if state["measure"]:
                lat.append(time.perf_counter() - t0)
                gets.append(n)

    jobs = [asyncio.create_task(client(s)) for s in sessions]
    try:
        await asyncio.sleep(plan.warmup_s)
        pids = srv.pids()
        sent0 = sum(s.sent for s in sessions)
        c0 = {p: cpu_s(p) for p in [*pids, redis_pid]}
        d0, m0 = time.process_time(), machine_busy_s()
        wall = await measure_window(state, plan.window_s)
        c1 = {p: cpu_s(p) for p in c0}
        driver, busy = time.process_time() - d0, machine_busy_s() - m0
        sent = sum(s.sent for s in sessions) - sent0
        state["stop"] = True
        await asyncio.gather(*jobs)
    finally:
        drop_load(jobs, sessions)
    used = {p: c1[p] - c0[p] for p in c0}
    workers_cpu = [used[p] for p in srv.worker_pids]
    n = len(lat)
    return {
        "tasks_per_s": n / wall,
        "requests_per_s": sent / wall,
        "p50_ms": pct(lat, 50) * 1e3,
        "p99_ms": pct(lat, 99) * 1e3,
        "gets_per_task": sum(gets) / max(n, 1),
        "server_cpu_ms_per_task": sum(used.values()) / max(n, 1) * 1e3,
        "workers_cpu_util": sum(workers_cpu) / wall,
        "redis_cpu_util": used[redis_pid] / wall,
        "driver_cpu_util": driver / wall,
        "others_cpu_util": max(0.0, busy - driver - sum(used.values())) / wall,
        "worker_cpu_share": [round(c / max(sum(workers_cpu), 1e-9), 3) for c in workers_cpu],
        "tasks": n,
    }


def _median_row(workers: int, reps: list[dict[str, Any]]) -> dict[str, Any]:
    row: dict[str, Any] = {"workers": workers, "reps": len(reps)}
    for key, value in reps[0].items():
        if isinstance(value, (int, float)):
            row[key] = statistics.median(r[key] for r in reps)
    row["worker_cpu_share"] = [r["worker_cpu_share"] for r in reps]
    return row


async def scaleout(
    quick: bool,
    workers: Sequence[int] = (1, 2),
    plan: ScalePlan | None = None,
    log_dir: Path | None = None,
) -> list[dict[str, Any]]:
    """One row per worker count (medians over ``plan.reps`` repetitions, worker counts
    alternating within each repetition), each with ``x_1_worker``."""
    plan = plan or (QUICK if quick else ScalePlan())
    tmp = Path(log_dir or tempfile.mkdtemp(prefix="scaleout-"))
    tmp.mkdir(parents=True, exist_ok=True)
    names = [f"tok-{i}" for i in range(plan.clients)]
    tokens = tmp / "tokens.json"
    tokens.write_text(json.dumps({t: f"client-{i}" for i, t in enumerate(names)}))
    runs: dict[int, list[dict[str, Any]]] = {n: [] for n in workers}
    with redis_server(tmp / "redis.log") as (redis, redis_port):
        for _ in range(100):
            with contextlib.suppress(OSError):
                if (await redis_command(redis_port, "PING")).startswith(b"+PONG"):
                    break
            await asyncio.sleep(0.05)
        for rep in range(plan.reps):
            for n in workers:
                ns = f"scale-{n}-{rep}"
                srv = Server(n, redis_port, tokens, tmp / f"server-{n}.log", ns)
                try:
                    await srv.start()
                    runs[n].append(await measure(srv, redis.pid, plan, names))
                finally:
                    srv.stop()
                await redis_command(redis_port, "FLUSHALL")
    rows = [_median_row(n, runs[n]) for n in workers]
    base = rows[0]["tasks_per_s"] if rows and rows[0]["workers"] == 1 else None
    for row in rows:
        row["x_1_worker"] = row["tasks_per_s"] / base if base else None
    return rows


def run_scaleout(
    quick: bool,
    workers: Sequence[int] = (1, 2),
    plan: ScalePlan | None = None,
    log_dir: Path | None = None,
) -> list[dict[str, Any]]:
    """:func:`scaleout` in an event loop of its own (from synchronous code)."""
    return asyncio.run(scaleout(quick, workers, plan, log_dir))


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| workers | tasks/s | × 1 worker | requests/s | p50 ms | p99 ms | gets/task "
        "| server CPU ms/task | tasks/s per core used | workers' CPU (cores) | Redis CPU "
        "| driver CPU | other processes' CPU | workers' CPU shares |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        x = r.get("x_1_worker")
        shares = "; ".join("/".join(f"{v:.0%}" for v in rep) for rep in r["worker_cpu_share"])
        lines.append(
            f"| {r['workers']} | {r['tasks_per_s']:,.0f} | {'–' if x is None else f'{x:.2f}'} "
            f"| {r['requests_per_s']:,.0f} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} "
            f"| {r['gets_per_task']:.2f} | {r['server_cpu_ms_per_task']:.3f} "
            f"| {per_core(r):,.0f} | {r['workers_cpu_util']:.2f} | {r['redis_cpu_util']:.2f} "
            f"| {r['driver_cpu_util']:.2f} | {r['others_cpu_util']:.2f} | {shares} |"
        )
    return "\n".join(lines)


def per_core(row: dict[str, Any]) -> float:
    """Tasks per second per core the server used (its workers and Redis together)."""
    return row["tasks_per_s"] / max(row["workers_cpu_util"] + row["redis_cpu_util"], 1e-9)


async def measure_window(state: dict[str, bool], window_s: float) -> float:
    """Let the clients count what completes for ``window_s``: the wall time it took."""
    t0 = time.perf_counter()
    state["measure"] = True
    await asyncio.sleep(window_s)
    state["measure"] = False
    return time.perf_counter() - t0


def drop_load(jobs: list[asyncio.Task[None]], sessions: list[Session]) -> None:
    """Cancel the client jobs and close their sessions."""
    for job in jobs:
        job.cancel()
    for s in sessions:
        s.close()


async def accepts(port: int) -> bool:
    """Whether ``port`` on the benchmark's host accepts a connection."""
    try:
        _, writer = await asyncio.open_connection(HOST, port)
    except OSError:
        return False
    writer.close()
    return True


def bench_parser(doc: str) -> argparse.ArgumentParser:
    """A scale-out benchmark's command line: ``--quick``, ``--reps``, ``--window`` and
    ``--json``; the benchmark adds its own options."""
    parser = argparse.ArgumentParser(description=doc.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="a few seconds (tests)")
    parser.add_argument("--reps", type=int, help="repetitions per row")
    parser.add_argument("--window", type=float, help="seconds measured per repetition")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    return parser


def report(table: str, rows: list[dict[str, Any]], path: Path | None) -> int:
    """Print the table; write the rows as JSON to ``path`` when given."""
    print(table)
    if path:
        path.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--workers", default="1,2", help="worker counts, comma-separated")
    parser.add_argument("--clients", type=int, help="concurrent clients (default 8; quick 4)")
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else ScalePlan()
    plan = ScalePlan(
        clients=args.clients or plan.clients,
        reps=args.reps or plan.reps,
        warmup_s=plan.warmup_s,
        window_s=args.window or plan.window_s,
    )
    workers = [int(w) for w in args.workers.split(",")]
    rows = run_scaleout(args.quick, workers, plan)
    return report(markdown(rows), rows, args.json)


if __name__ == "__main__":
    sys.exit(main())
