"""Runtime benchmark: store operations, engine lifecycle (memory vs SQLite), tasks/result
wake-up, tasks/list pages, memory.

    .venv/bin/python benchmarks/bench_runtime.py [--quick]

Every figure is printed next to a baseline measured in the same run: a bare dict
holding the same ``TaskRecord`` objects. Informational only: the test suite runs
``--quick`` to keep this script working and never asserts on timings.
"""

from __future__ import annotations

import argparse
import gc
import secrets
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio

from mcp_tasks.core.handlers import RequestContext
from mcp_tasks.protocol import COMPLETED, INITIAL, TASKS_LIST, TASKS_RESULT, TOOLS_CALL
from mcp_tasks.runtime import (
    CoreTasks,
    EngineConfig,
    InMemoryTaskStore,
    SqliteTaskStore,
    TaskContext,
    TaskEngine,
)
from mcp_tasks.store import TaskRecord, TaskStore

RESULT = {"content": [{"type": "text", "text": "ok"}]}


def records(n: int, requestor: str = "bench") -> list[TaskRecord]:
    now = time.time()
    return [
        TaskRecord(
            task_id=secrets.token_urlsafe(16),
            requestor=requestor,
            method=TOOLS_CALL,
            status=INITIAL,
            created_at=now + i * 1e-6,
            last_updated_at=now,
            ttl_ms=3_600_000,
            poll_interval_ms=500,
        )
        for i in range(n)
    ]


async def timed(n: int, op: Callable[[int], Awaitable[Any]]) -> float:
    """Operations per second of ``op(i)`` for i in range(n)."""
    t = time.perf_counter()
    for i in range(n):
        await op(i)
    return n / (time.perf_counter() - t)


async def bench_store(name: str, store: TaskStore, n: int, gets: int) -> dict[str, float]:
    recs = records(n)
    out: dict[str, float] = {}
    out["create"] = await timed(n, lambda i: store.create(recs[i]))
    ids = [r.task_id for r in recs]
    now = time.time()
    out["get"] = await timed(gets, lambda i: store.get(ids[i % n]))
    out["complete"] = await timed(
        n, lambda i: store.transition(ids[i], COMPLETED, now=now, result=RESULT)
    )

    async def get_result(i: int) -> Any:
        rec = await store.get(ids[i % n])
        return rec.result if rec is not None else None

    out["get-result"] = await timed(gets, get_result)
    return out


async def bench_dict(n: int, gets: int) -> dict[str, float]:
    d: dict[str, TaskRecord] = {}
    recs = records(n)
    ids = [r.task_id for r in recs]
    out: dict[str, float] = {}

    async def create(i: int) -> None:
        d[recs[i].task_id] = recs[i]

    async def get(i: int) -> Any:
        return d.get(ids[i % n])

    async def complete(i: int) -> None:
        d[ids[i]] = replace(d[ids[i]], status=COMPLETED, result=RESULT)

    async def get_result(i: int) -> Any:
        rec = d.get(ids[i % n])
        return rec.result if rec is not None else None

    out["create"] = await timed(n, create)
    out["get"] = await timed(gets, get)
    out["complete"] = await timed(n, complete)
    out["get-result"] = await timed(gets, get_result)
    return out


async def get_rate(store: TaskStore | None, size: int, gets: int) -> float:
    """Gets/s at random positions among ``size`` stored tasks; ``store=None``: a bare dict,
    the baseline (its own slowdown with size is memory locality, not the algorithm)."""
    recs = records(size, "sized")
    ids = [r.task_id for r in recs]
    if store is None:
        d = {r.task_id: r for r in recs}

        async def dict_get(i: int) -> Any:
            return d.get(ids[(i * 7919) % size])

        return await timed(gets, dict_get)
    for r in recs:
        await store.create(r)
    return await timed(gets, lambda i: store.get(ids[(i * 7919) % size]))


async def wakeup_latency(samples: int) -> tuple[float, float]:
    ctx = RequestContext(requestor="bench")
    lat: list[float] = []
    async with TaskEngine(InMemoryTaskStore(), EngineConfig(max_active_per_requestor=10**6)) as eng:
        for _ in range(samples):
            go = anyio.Event()
            stamp: list[float] = []

            async def work(
                tc: TaskContext, go: anyio.Event = go, stamp: list[float] = stamp
            ) -> dict[str, Any]:
                await go.wait()
                stamp.append(time.perf_counter())
                return RESULT

            tid = (
                await CoreTasks(eng).dispatch_augmented(TOOLS_CALL, {"task": {}}, ctx, work=work)
            )["task"]["taskId"]
            async with anyio.create_task_group() as tg:

                async def waiter(tid: str = tid, stamp: list[float] = stamp) -> None:
                    await CoreTasks(eng).dispatch(TASKS_RESULT, {"taskId": tid}, ctx)
                    lat.append(time.perf_counter() - stamp[0])

                tg.start_soon(waiter)
                await anyio.sleep(0.0005)
                go.set()
    lat.sort()
    return statistics.median(lat) * 1000, lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000


async def list_page_times(sizes: tuple[int, ...], rounds: int, pages: int) -> list[float]:
    """Median time (us) of one ``tasks/list`` page at each retained size.

    The engines for all sizes are built first, then measured in interleaved rounds, so that a
    load change on a shared machine hits every size alike (medians over rounds)."""
    ctx = RequestContext(requestor="bench")
    setups = []
    for size in sizes:
        store = InMemoryTaskStore()
        for r in records(size, "bench"):
            await store.create(r)
        eng = TaskEngine(store, EngineConfig(rate_limit_calls=10**9))
        first = await CoreTasks(eng).dispatch(TASKS_LIST, {}, ctx)
        setups.append((eng, first["nextCursor"]))
    samples: list[list[float]] = [[] for _ in sizes]
    for _ in range(rounds):
        for k, (eng, cursor) in enumerate(setups):
            t = time.perf_counter()
            for _ in range(pages):
                page = await CoreTasks(eng).dispatch(TASKS_LIST, {"cursor": cursor}, ctx)
                assert len(page["tasks"]) == 50
            samples[k].append((time.perf_counter() - t) / pages * 1e6)
    return [statistics.median(x) for x in samples]


async def bytes_per_task(n: int) -> tuple[float, int]:
    ctx = RequestContext(requestor="bench")
    results = [{"content": [{"type": "text", "text": f"result {i}"}]} for i in range(n)]
    cfg = EngineConfig(max_active_per_requestor=10**6, rate_limit_calls=10**9)
    gc.collect()
    tracemalloc.start()
    async with TaskEngine(InMemoryTaskStore(), cfg) as eng:
        base = tracemalloc.get_traced_memory()[0]
        for i in range(n):

            async def work(tc: TaskContext, r: dict[str, Any] = results[i]) -> dict[str, Any]:
                return r

            await CoreTasks(eng).dispatch_augmented(TOOLS_CALL, {"task": {}}, ctx, work=work)
        while eng.running:
            await anyio.sleep(0.001)
        gc.collect()
        used = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    return used / n, len(eng.store)  # type: ignore[arg-type]


async def engine_lifecycle(
    store: TaskStore, n: int, conc: int, config: EngineConfig | None = None
) -> tuple[float, float]:
    """Engine-level lifecycle (create -> complete -> ``tasks/result``) with ``conc``
    concurrent clients: (tasks/s wall, ms of this process's CPU per task)."""
    cfg = config or EngineConfig(
        cursor_secret=b"bench", rate_limit_calls=10**9, max_active_per_requestor=10**6
    )
    per = max(1, n // conc)

    async def work(tc: TaskContext) -> dict[str, Any]:
        return RESULT

    async with TaskEngine(store, cfg) as eng:

        async def client(w: int) -> None:
            ctx = RequestContext(requestor=f"life-{w % 4}")
            for _ in range(per):
                tid = (
                    await CoreTasks(eng).dispatch_augmented(
                        TOOLS_CALL, {"task": {}}, ctx, work=work
                    )
                )["task"]["taskId"]
                await CoreTasks(eng).dispatch(TASKS_RESULT, {"taskId": tid}, ctx)

        await client(0)  # warm up (scripts, statements, caches)
        t, cpu = time.perf_counter(), time.process_time()
        async with anyio.create_task_group() as tg:
            for w in range(conc):
                tg.start_soon(client, w)
        wall, cpu = time.perf_counter() - t, time.process_time() - cpu
    return conc * per / wall, cpu / (conc * per) * 1000


async def lifecycle_rows(
    makers: dict[str, Callable[[], TaskStore]], n: int, concs: tuple[int, ...], rounds: int
) -> dict[tuple[str, int], tuple[float, float]]:
    """Median (tasks/s, CPU ms/task) per store and concurrency; the stores alternate
    within each round so that load on a shared machine hits them alike."""
    got: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for _ in range(rounds):
        for conc in concs:
            for name, make in makers.items():
                store = make()
                try:
                    got.setdefault((name, conc), []).append(await engine_lifecycle(store, n, conc))
                finally:
                    await store.close()
    return {
        k: (statistics.median(a for a, _ in v), statistics.median(c for _, c in v))
        for k, v in got.items()
    }


def print_lifecycle(rows: dict[tuple[str, int], tuple[float, float]], base: str) -> None:
    print(f"engine lifecycle (create -> complete -> tasks/result), ratio to {base} in this run")
    for (name, conc), (rate, cpu) in rows.items():
        ratio = rate / rows[(base, conc)][0]
        print(
            f"  {name:<8} {conc:>3} concurrent: {rate:>8,.0f} tasks/s  "
            f"{cpu:6.3f} ms CPU/task  ({ratio:4.2f}x {base})"
        )


def row(label: str, value: float, base: float | None = None, unit: str = "ops/s") -> None:
    ratio = f"   ({value / base:6.2f}x dict)" if base else ""
    print(f"  {label:<34} {value:>14,.0f} {unit}{ratio}")


async def main(quick: bool) -> None:
    n = 2_000 if quick else 100_000
    gets = 5_000 if quick else 500_000
    sq_n = 200 if quick else 5_000
    print(
        f"mcp_tasks runtime benchmark (python {sys.version.split()[0]}{', quick' if quick else ''})"
    )
    base = await bench_dict(n, gets)
    mem = await bench_store("memory", InMemoryTaskStore(), n, gets)
    with tempfile.TemporaryDirectory() as tmp:
        sq_store = SqliteTaskStore(Path(tmp) / "bench.db")
        sq = await bench_store("sqlite", sq_store, sq_n, sq_n)
        await sq_store.close()
    print(f"store operations ({n:,} tasks in memory, {sq_n:,} in SQLite)")
    for op in ("create", "get", "complete", "get-result"):
        row(f"dict baseline {op}", base[op])
        row(f"InMemoryTaskStore {op}", mem[op], base[op])
        row(f"SqliteTaskStore {op}", sq[op], base[op])
    small, large = (1_000, 10_000) if quick else (1_000, 100_000)
    d_small = await get_rate(None, small, gets)
    d_large = await get_rate(None, large, gets)
    g_small = await get_rate(InMemoryTaskStore(), small, gets)
    g_large = await get_rate(InMemoryTaskStore(), large, gets)
    print("get with many tasks stored (memory; random positions)")
    row(f"dict baseline get @ {small:,} tasks", d_small)
    row(f"dict baseline get @ {large:,} tasks", d_large)
    row(f"InMemoryTaskStore get @ {small:,} tasks", g_small, d_small)
    row(f"InMemoryTaskStore get @ {large:,} tasks", g_large, d_large)
    print(
        f"  ratio {large:,}/{small:,}: store {g_large / g_small:.2f}, "
        f"dict baseline {d_large / d_small:.2f} (same access pattern)"
    )
    with tempfile.TemporaryDirectory() as tmp:
        seq = iter(range(10**6))
        life = await lifecycle_rows(
            {
                "memory": InMemoryTaskStore,
                "sqlite": lambda: SqliteTaskStore(Path(tmp) / f"life{next(seq)}.db"),
            },
            400 if quick else 4_000,
            (8, 32),
            1 if quick else 5,
        )
    print_lifecycle(life, "memory")
    p50, p99 = await wakeup_latency(50 if quick else 1_000)
    print("tasks/result wake-up latency after completion (memory)")
    print(f"  p50 {p50:.3f} ms   p99 {p99:.3f} ms")
    t_small, t_large = await list_page_times(
        (small, large), 5 if quick else 21, 4 if quick else 100
    )
    print("tasks/list page of 50 (memory, engine incl. cursor signing)")
    print(f"  {small:>7,} retained: {t_small:8.1f} us/page")
    print(f"  {large:>7,} retained: {t_large:8.1f} us/page")
    print(f"  ratio: {t_large / t_small:.2f}")
    per, kept = await bytes_per_task(1_000 if quick else 20_000)
    print("memory per retained completed task (engine + memory store, tracemalloc)")
    print(f"  {per:,.0f} bytes/task beyond its result payload ({kept:,} tasks kept;")
    print("  the payloads were allocated before tracing started, so they are not counted)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="small sizes, for the smoke test")
    anyio.run(main, ap.parse_args().quick)
