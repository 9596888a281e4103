"""What metrics cost: the task lifecycle with metrics off and on, in one run.

    .venv/bin/python benchmarks/bench_metrics.py [--quick] [--reps N] [--seconds S]

Two measurements, each alternating off and on within every repetition (medians), so load
on a shared machine hits both alike:

- **server**: the example server as users run it (``python -m mcp_tasks.examples.server
  --http ...``, memory store, ``--rate-limit 1000000/1``), against itself with ``--ops``,
  ``--metrics-token-file`` and ``--admin-token-file`` (metrics counted, the dashboard's feed
  attached), scraped once a second meanwhile; 8 sessions each looping a task-augmented
  ``slow_compute(0)`` then ``tasks/result`` over Streamable HTTP (``peers/driver.py``).
  Tasks/s and the server's CPU per task (``/proc``).
- **engine**: the same lifecycle in-process through ``CoreTasks`` (no transport), with a
  ``TaskMetrics`` attached or not: the worst case, where nothing else costs. Tasks/s and
  this process's CPU per task (``time.process_time``).

Prints both figures and their ratio (on / off). Informational: never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "peers"))

from driver import Session  # noqa: E402

from mcp_tasks.core.handlers import RequestContext  # noqa: E402
from mcp_tasks.protocol import TASKS_RESULT, TOOLS_CALL  # noqa: E402
from mcp_tasks.runtime import CoreTasks, EngineConfig, TaskContext, TaskEngine  # noqa: E402
from mcp_tasks.runtime.ops.metrics import TaskMetrics  # noqa: E402

RESULT = {"content": [{"type": "text", "text": "ok"}]}
METRICS_TOKEN = "bench-metrics-token-0123456789"
ADMIN_TOKEN = "bench-admin-token-0123456789ab"
TICK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


class Server:
    def __init__(self, metrics: bool, tmp: Path) -> None:
        self.port = free_port()
        self.ops_port = free_port()
        args = [sys.executable, "-m", "mcp_tasks.examples.server"]
        args += ["--http", f"127.0.0.1:{self.port}", "--rate-limit", "1000000/1"]
        if metrics:
            (tmp / "m").write_text(METRICS_TOKEN)
            (tmp / "a").write_text(ADMIN_TOKEN)
            args += ["--ops", f"127.0.0.1:{self.ops_port}"]
            args += ["--metrics-token-file", str(tmp / "m"), "--admin-token-file", str(tmp / "a")]
        self.metrics = metrics
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._wait(self.port)

    def _wait(self, port: int) -> None:
        import socket

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("server did not start")

    def scrape(self) -> None:
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.ops_port}/metrics",
            headers={"Authorization": f"Bearer {METRICS_TOKEN}"},
        )
        with urllib.request.urlopen(req, timeout=10) as r:
            r.read()

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


async def server_round(metrics: bool, seconds: float, sessions: int) -> tuple[float, float]:
    """(tasks/s, server CPU ms per task) of one server for ``seconds``."""
    with tempfile.TemporaryDirectory() as tmp:
        srv = Server(metrics, Path(tmp))
        try:
            if metrics:
                srv._wait(srv.ops_port)
            clients = [await Session("127.0.0.1", srv.port).open() for _ in range(sessions)]
            done = [0]
            stop_at = [0.0]

            async def loop(s: Session) -> None:
                while time.perf_counter() < stop_at[0]:
                    task = await s.task_call(0)
                    await s.call("tasks/result", {"taskId": task["taskId"]})
                    done[0] += 1

            async def scraper() -> None:
                while time.perf_counter() < stop_at[0]:
                    await asyncio.to_thread(srv.scrape)
                    await asyncio.sleep(1)

            stop_at[0] = time.perf_counter() + 1.0  # warm up
            await asyncio.gather(*(loop(s) for s in clients))
            done[0] = 0
            t, cpu = time.perf_counter(), cpu_s(srv.proc.pid)
            stop_at[0] = t + seconds
            jobs = [loop(s) for s in clients] + ([scraper()] if metrics else [])
            await asyncio.gather(*jobs)
            wall, used = time.perf_counter() - t, cpu_s(srv.proc.pid) - cpu
            for s in clients:
                s.close()
            return done[0] / wall, used / max(done[0], 1) * 1000
        finally:
            srv.stop()


async def engine_round(metrics: bool, n: int, conc: int) -> tuple[float, float]:
    """(tasks/s, this process's CPU ms per task) of the in-process lifecycle, ``TaskMetrics``
    attached or not. The CPU figure is the steadier one on a shared machine: other
    processes' load slows the wall clock, not this process's own CPU time per task."""
    cfg = EngineConfig(rate_limit_calls=10**9, max_active_per_requestor=10**6)

    async def work(tc: TaskContext) -> dict[str, Any]:
        return RESULT

    meter = TaskMetrics() if metrics else None
    try:
        async with TaskEngine(None, cfg) as eng:
            if meter is not None:
                meter.attach(eng, tools={"bench"})
            core = CoreTasks(eng)
            per = max(1, n // conc)

            async def client(w: int) -> None:
                ctx = RequestContext(requestor=f"r{w % 4}")
                for _ in range(per):
                    params = {"name": "bench", "task": {}}
                    created = await core.dispatch_augmented(TOOLS_CALL, params, ctx, work=work)
                    await core.dispatch(TASKS_RESULT, {"taskId": created["task"]["taskId"]}, ctx)

            await client(0)
            t, cpu = time.perf_counter(), time.process_time()
            async with anyio.create_task_group() as tg:
                for w in range(conc):
                    tg.start_soon(client, w)
            rate = conc * per / (time.perf_counter() - t)
            cpu_ms = (time.process_time() - cpu) / (conc * per) * 1000
        if meter is not None:
            meter.render()
        return rate, cpu_ms
    finally:
        if meter is not None:
            meter.close()


def show(
    name: str,
    off: list[float],
    on: list[float],
    unit: str,
    cpu: tuple[list[float], list[float]] | None = None,
) -> None:
    a, b = statistics.median(off), statistics.median(on)
    print(f"{name}: metrics off {a:,.0f} {unit}, on {b:,.0f} {unit}, on/off = {b / a:.3f}")
    if cpu is not None:
        c, d = statistics.median(cpu[0]), statistics.median(cpu[1])
        print(f"{name}: server CPU per task off {c:.3f} ms, on {d:.3f} ms, on/off = {d / c:.3f}")


async def main(quick: bool, reps: int, seconds: float) -> None:
    print(f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; {reps} repetitions")
    rates: dict[bool, list[float]] = {False: [], True: []}
    cpus: dict[bool, list[float]] = {False: [], True: []}
    for rep in range(reps):
        for metrics in (False, True) if rep % 2 == 0 else (True, False):
            rate, cpu = await server_round(metrics, seconds, 2 if quick else 8)
            rates[metrics].append(rate)
            cpus[metrics].append(cpu)
    show("server lifecycle", rates[False], rates[True], "tasks/s", (cpus[False], cpus[True]))
    engine: dict[bool, list[float]] = {False: [], True: []}
    engine_cpu: dict[bool, list[float]] = {False: [], True: []}
    n = 500 if quick else 20_000
    for rep in range(max(reps, 3)):
        for metrics in (False, True) if rep % 2 == 0 else (True, False):
            rate, cpu = await engine_round(metrics, n, 8)
            engine[metrics].append(rate)
            engine_cpu[metrics].append(cpu)
    show("engine lifecycle", engine[False], engine[True], "tasks/s")
    c, d = statistics.median(engine_cpu[False]), statistics.median(engine_cpu[True])
    print(f"engine lifecycle: CPU per task off {c:.3f} ms, on {d:.3f} ms, on/off = {d / c:.3f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="seconds, tiny sizes (the tests)")
    parser.add_argument("--reps", type=int, default=None)
    parser.add_argument("--seconds", type=float, default=None)
    opts = parser.parse_args()
    reps = opts.reps or (1 if opts.quick else 5)
    seconds = opts.seconds or (1.0 if opts.quick else 8.0)
    asyncio.run(main(opts.quick, reps, seconds))
