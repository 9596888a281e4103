"""Redis task-store benchmark: lifecycle throughput, cross-instance wake-up latency,
Redis round trips per task lifecycle, against ``redis-benchmark -q -t set,get``.

    .venv/bin/python benchmarks/bench_redis.py [--quick] [--url redis://HOST:PORT/DB]

Without ``--url`` it starts its own ``redis-server`` (127.0.0.1, a free port, no
persistence) and stops it at the end. The baseline is ``redis-benchmark``'s own
SET/GET rate against the same server, measured in the same run (50 clients,
pipelining off: one round trip per request). Our figures are single-connection,
sequential unless said otherwise, so compare "round trips per lifecycle" with
the baseline rate. Informational only: the test suite runs ``--quick`` and never
asserts on timings.

Measured:

- lifecycle: create -> get (another instance) -> working->completed -> get result, per task,
  through ``RedisTaskStore`` (sequential, and 32 concurrent lifecycles);
- round trips per lifecycle: counted by Redis itself (``INFO commandstats`` deltas:
  every command, scripts counted once) and by the store's own counter (pipelines = 1);
- engine lifecycle (create -> complete -> ``tasks/result`` through ``TaskEngine``), memory
  store and Redis alternating, 8 and 32 concurrent clients: tasks/s, this process's CPU
  per task, and the ratio to the memory store in the same run;
- ``tasks/list`` through the engine at 5,000 retained tasks (1,000 with ``--quick``): the
  first page and a later one, with the store's round trips per page;
- wake-up: instance A's engine waits in ``tasks/result``; instance B's engine finishes the
  task; time from B starting the completing write to A's ``tasks/result`` returning
  (p50/p99), i.e. script + pub/sub delivery + A's re-read of the task.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any

import anyio

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_runtime import lifecycle_rows, print_lifecycle

from mcp_tasks.core.handlers import RequestContext
from mcp_tasks.lifecycle import COMPLETED, WORKING
from mcp_tasks.runtime import CoreTasks, EngineConfig, InMemoryTaskStore, TaskContext, TaskEngine
from mcp_tasks.runtime.stores.redis import RedisTaskStore
from mcp_tasks.store import TaskRecord

RESULT = {"content": [{"type": "text", "text": "ok"}], "isError": False}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_redis(workdir: str) -> tuple[subprocess.Popen[bytes], int]:
    binary = shutil.which("redis-server")
    if binary is None:
        sys.exit("bench_redis: redis-server is not installed (apt-get install redis-server)")
    port = free_port()
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", workdir, "--loglevel", "warning"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as c:
                c.sendall(b"PING\r\n")
                if c.recv(16).startswith(b"+PONG"):
                    return proc, port
        except OSError:
            time.sleep(0.05)
    proc.kill()
    sys.exit("bench_redis: redis-server did not start")


def redis_benchmark(host: str, port: int, n: int) -> dict[str, float]:
    binary = shutil.which("redis-benchmark")
    if binary is None:
        return {}
    out = subprocess.run(
        [binary, "-h", host, "-p", str(port), "-q", "-t", "set,get", "-n", str(n)],
        capture_output=True, text=True, timeout=300,
    ).stdout  # fmt: skip
    rates: dict[str, float] = {}
    for line in out.replace("\r", "\n").splitlines():
        m = re.match(r"^(SET|GET): ([\d.]+) requests per second", line.strip())
        if m:
            rates[m.group(1)] = float(m.group(2))
    return rates


def record(i: int, requestor: str) -> TaskRecord:
    now = time.time()
    return TaskRecord(
        task_id=f"{uuid.uuid4().hex}-{i}",
        requestor=requestor,
        method="tools/call",
        status=WORKING,
        created_at=now,
        last_updated_at=now,
        ttl_ms=3_600_000,
        poll_interval_ms=500,
    )


async def commandstats(store: RedisTaskStore) -> int:
    info = await store.redis.info("commandstats")
    return sum(int(v["calls"]) for k, v in info.items() if k.startswith("cmdstat_"))


async def lifecycle(a: RedisTaskStore, b: RedisTaskStore, i: int, requestor: str) -> None:
    rec = record(i, requestor)
    await a.create(rec)  # instance A accepts the task
    got = await b.get(rec.task_id)  # a tasks/get lands on instance B
    assert got is not None
    done = await a.transition(rec.task_id, COMPLETED, now=time.time(), result=RESULT)
    assert done is not None
    final = await b.get(rec.task_id)  # tasks/result on B reads the result
    assert final is not None and final.result == RESULT


async def bench_lifecycle(url: str, n: int) -> dict[str, float]:
    ns = "bench-" + uuid.uuid4().hex[:8]
    a = RedisTaskStore(url, namespace=ns)
    b = RedisTaskStore(url, namespace=ns)
    out: dict[str, float] = {}
    try:
        await lifecycle(a, b, -1, "warm")  # load the scripts
        # round trips for one lifecycle, B seeing the task for the first time
        before_cmds, before_a, before_b = await commandstats(a), a.round_trips, b.round_trips
        await lifecycle(a, b, -2, "count")
        after_cmds = await commandstats(a)
        out["commands"] = after_cmds - before_cmds - 1  # minus the INFO call itself
        out["round_trips"] = (a.round_trips - before_a) + (b.round_trips - before_b)
        t = time.perf_counter()
        for i in range(n):
            await lifecycle(a, b, i, "seq")
        out["seq"] = n / (time.perf_counter() - t)
        t = time.perf_counter()
        conc = 32
        per = max(1, n // conc)

        async def worker(w: int) -> None:
            for j in range(per):
                await lifecycle(a, b, w * per + j, f"conc-{w % 4}")

        async with anyio.create_task_group() as tg:
            for w in range(conc):
                tg.start_soon(worker, w)
        out["conc"] = conc * per / (time.perf_counter() - t)
        out["conc_n"] = conc * per
        await a.redis.eval(
            "for _, k in ipairs(redis.call('KEYS', ARGV[1])) do redis.call('DEL', k) end",
            0,
            ns + ":*",
        )
    finally:
        await a.close()
        await b.close()
    return out


async def bench_wakeup(url: str, n: int) -> list[float]:
    """A waits in tasks/result; B's engine completes the task: latency of A's wake-up."""
    ns = "bench-" + uuid.uuid4().hex[:8]
    sa = RedisTaskStore(url, namespace=ns)
    sb = RedisTaskStore(url, namespace=ns)
    ctx = RequestContext(requestor="waker")
    cfg = EngineConfig(cursor_secret=b"x", rate_limit_calls=10**9, max_active_per_requestor=10**6)
    lat: list[float] = []
    try:
        async with TaskEngine(sa, cfg) as a, TaskEngine(sb, cfg) as b:
            for _ in range(n):
                release = anyio.Event()
                done_at: list[float] = []

                async def work(tc: TaskContext, release: anyio.Event = release) -> dict[str, Any]:
                    await release.wait()
                    return RESULT

                tid = (
                    await CoreTasks(b).dispatch_augmented(
                        "tools/call", {"task": {}}, ctx, work=work
                    )
                )["task"]["taskId"]
                woke: list[float] = []

                async def waiter(tid: str = tid, woke: list[float] = woke) -> None:
                    await CoreTasks(a).dispatch("tasks/result", {"taskId": tid}, ctx)
                    woke.append(time.perf_counter())

                orig = sb.transition

                async def timed_transition(
                    *args: Any, orig: Any = orig, done_at: list[float] = done_at, **kw: Any
                ) -> Any:
                    if args[1] == COMPLETED:  # B starts the completing write
                        done_at.append(time.perf_counter())
                    return await orig(*args, **kw)

                sb.transition = timed_transition  # type: ignore[method-assign]
                async with anyio.create_task_group() as tg:
                    tg.start_soon(waiter)
                    await anyio.sleep(0.005)  # A is waiting (its watch is registered)
                    release.set()
                sb.transition = orig  # type: ignore[method-assign]
                # From B starting its write (Lua script + PUBLISH) to A's tasks/result
                # returning (pub/sub delivery, then A's re-read of the task: one round trip)
                lat.append((woke[0] - done_at[0]) * 1000)
    finally:
        await sa.close()
        await sb.close()
    return lat


async def bench_list(url: str, retained: int, pages: int) -> dict[str, float]:
    """``tasks/list`` through the engine with ``retained`` tasks of one requestor: the first
    page and a later page (median ms of ``pages`` each), and the round trips per page."""
    ns = "bench-" + uuid.uuid4().hex[:8]
    store = RedisTaskStore(url, namespace=ns)
    ctx = RequestContext(requestor="lister")
    cfg = EngineConfig(cursor_secret=b"x", rate_limit_calls=10**9)
    out: dict[str, float] = {}
    try:
        recs = [record(i, "lister") for i in range(retained)]

        async def filler(w: int) -> None:
            for r in recs[w::16]:
                await store.create(r)

        async with anyio.create_task_group() as tg:
            for w in range(16):
                tg.start_soon(filler, w)
        eng = TaskEngine(store, cfg)
        first = await CoreTasks(eng).dispatch(
            "tasks/list", {}, ctx
        )  # warm up (script load, secret)
        cursor = first["nextCursor"]
        for name, params in (("first", {}), ("later", {"cursor": cursor})):
            times, trips = [], store.round_trips
            for _ in range(pages):
                t = time.perf_counter()
                page = await CoreTasks(eng).dispatch("tasks/list", params, ctx)
                times.append((time.perf_counter() - t) * 1000)
                assert page["tasks"]
            out[name] = statistics.median(times)
            out[name + "_trips"] = (store.round_trips - trips) / pages
        out["size"] = len(first["tasks"])
        await store.redis.eval(
            "for _, k in ipairs(redis.call('KEYS', ARGV[1])) do redis.call('DEL', k) end",
            0,
            ns + ":*",
        )
    finally:
        await store.close()
    return out


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


async def run(url: str, quick: bool) -> None:
    n_life = 200 if quick else 3000
    n_wake = 30 if quick else 500
    n_base = 2000 if quick else 100_000
    m = re.match(r"redis://([^:/]+):(\d+)", url)
    assert m, url
    base = redis_benchmark(m.group(1), int(m.group(2)), n_base)
    life = await bench_lifecycle(url, n_life)
    lat = await bench_wakeup(url, n_wake)
    pages = await bench_list(url, 1_000 if quick else 5_000, 10 if quick else 200)
    seq = iter(range(10**6))
    engine = await lifecycle_rows(
        {
            "memory": InMemoryTaskStore,
            "redis": lambda: RedisTaskStore(
                url, namespace=f"life-{uuid.uuid4().hex[:8]}-{next(seq)}"
            ),
        },
        400 if quick else 4_000,
        (8, 32),
        1 if quick else 5,
    )
    print(f"bench_redis ({'quick' if quick else 'full'}), Redis at {url}")
    if base:
        print(
            f"  baseline redis-benchmark -q -t set,get (-n {n_base}, 50 clients): "
            f"SET {base.get('SET', 0):,.0f}/s  GET {base.get('GET', 0):,.0f}/s"
        )
    else:
        print("  baseline: redis-benchmark not installed")
    print(
        f"  lifecycle (create, get on B, complete, get result on B): "
        f"{life['seq']:,.0f} tasks/s sequential, {life['conc']:,.0f} tasks/s with 32 concurrent"
    )
    if base.get("GET"):
        print(
            f"  lifecycle rate vs baseline GET rate: {life['conc'] / base['GET']:.3f} "
            f"(ratio of tasks/s to single GETs/s)"
        )
    print(
        f"  round trips per task lifecycle: {life['round_trips']:.0f} "
        f"(client round trips incl. pipelines); Redis commands executed: "
        f"{life['commands']:.0f} (INFO commandstats; a script counts once per call, "
        f"plus its inner calls)"
    )
    print(
        f"  cross-instance wake-up (B completes, A's tasks/result returns), n={len(lat)}: "
        f"p50 {statistics.median(lat):.2f} ms  p99 {pct(lat, 99):.2f} ms  "
        f"max {max(lat):.2f} ms  (target p99 < 10 ms)"
    )
    print(
        f"  tasks/list page of {pages['size']:.0f} (engine, {1_000 if quick else 5_000:,} retained): "
        f"first {pages['first']:.2f} ms ({pages['first_trips']:.0f} round trips), "
        f"later {pages['later']:.2f} ms ({pages['later_trips']:.0f} round trips)  "
        f"(target first page < 2 ms at 5,000)"
    )
    print_lifecycle(engine, "memory")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small counts (the smoke test)")
    parser.add_argument("--url", help="use this Redis instead of starting one")
    args = parser.parse_args()
    if args.url:
        anyio.run(run, args.url, args.quick)
        return
    with tempfile.TemporaryDirectory() as tmp:
        proc, port = start_redis(tmp)
        try:
            anyio.run(run, f"redis://127.0.0.1:{port}/0", args.quick)
        finally:
            os.kill(proc.pid, signal.SIGTERM)
            proc.wait(timeout=10)


if __name__ == "__main__":
    main()
