"""The workloads of ``peers_bench.py``, each on a started server (:class:`servers.Running`)
with the sizes of a :class:`Plan`: the lifecycle, the wake-up, polling and the list pages
and memory on the 2025-11-25 face; the lifecycle and polling on the extension's face.

Each returns the figures of one run as a dict (rates, latency percentiles, CPU per
operation); ``report.py`` makes the tables of them.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from driver import Session, Stateless
from localhost import HOST, pct, redis_commands_ran
from servers import EXT, Running, ServerSpec

EXT_POLL_PAUSE_S = 0.005  # between two tasks/get of the ext lifecycle (no blocking result)


@dataclass
class Plan:
    """The sizes of a run: repetitions, sessions and the measuring window of the throughput
    workloads, the retained tasks of the list rows, the wake-up's work and rounds."""

    reps: int = 3
    sessions: int = 8
    warmup_s: float = 0.5
    window_s: float = 2.0
    list_sizes: tuple[int, ...] = (1000, 5000)
    big_list: int = 100_000
    big_list_reps: int = 1  # 100,000-task rows in the first repetition only (time budget)
    list_reps: int = 2  # filling 5,000 tasks over the wire is the slowest part of a repetition
    wake_seconds: float = 0.5
    wake_rounds: int = 5
    fresh_process: bool = True
    #: ``--before``'s paired windows (``paired.py``): how many pairs, each window's warm-up
    #: and length
    pairs: int = 20
    pair_warmup_s: float = 0.2
    pair_window_s: float = 1.0
    #: the store rows' round trips (``w_counts``): lifecycles first run uncounted (past the
    #: 1,000 finished tasks the server keeps per client address, so that each counted one
    #: drops the oldest, as in the timed windows), lifecycles then counted, and how long
    #: ``tasks/get`` is counted on a task that ended over a second before
    count_warm: int = 1100
    count_tasks: int = 300
    count_gets_s: float = 1.0


QUICK = Plan(
    reps=1,
    sessions=2,
    warmup_s=0.1,
    window_s=0.3,
    wake_seconds=0.05,
    wake_rounds=2,
    list_sizes=(20, 60),
    big_list=200,
    list_reps=1,
    fresh_process=False,
    count_warm=20,
    count_tasks=20,
    count_gets_s=0.1,
    pairs=2,
    pair_warmup_s=0.1,
    pair_window_s=0.3,
)


async def open_sessions(port: int, n: int, conns: int = 1) -> list[Session]:
    return [await Session(HOST, port).open(conns) for _ in range(n)]


class Window:
    """Server CPU, driver CPU and wall time over a measuring window."""

    def __init__(self, srv: Running) -> None:
        self.srv = srv

    def __enter__(self) -> Window:
        self.t0, self.c0, self.d0 = time.perf_counter(), self.srv.cpu_s(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.t0
        self.server_cpu = self.srv.cpu_s() - self.c0
        self.driver_cpu = time.process_time() - self.d0


Step = Callable[[], Awaitable[Any]]


async def _loop(
    srv: Running, plan: Plan, steps: list[Step], outs: list[Any] | None = None
) -> tuple[list[float], Window]:
    """Each step in a loop of its own; the latencies of the steps ended inside the window
    (and, into ``outs``, what those steps returned: a count of theirs is then per step
    measured, not also over the warm-up and the tail)."""
    state = {"measure": False, "stop": False}
    lat: list[float] = []

    async def run(step: Step) -> None:
        while not state["stop"]:
            t0 = time.perf_counter()
            out = await step()
            if state["measure"]:
                lat.append(time.perf_counter() - t0)
                if outs is not None:
                    outs.append(out)

    jobs = [asyncio.create_task(run(step)) for step in steps]
    await asyncio.sleep(plan.warmup_s)
    state["measure"] = True
    with Window(srv) as w:
        await asyncio.sleep(plan.window_s)
        state["measure"] = False
    state["stop"] = True
    await asyncio.gather(*jobs)
    return lat, w


def _rates(lat: list[float], w: Window, per: str, reqs_per_op: float) -> dict[str, Any]:
    """Operations per second, latency percentiles and CPU per operation of one window."""
    n = len(lat)
    unit = "task" if per == "tasks" else "get"
    out: dict[str, Any] = {
        f"{per}_per_s": n / w.wall,
        "server_cpu_util": w.server_cpu / w.wall,
        "driver_cpu_us_per_req": w.driver_cpu / max(reqs_per_op * n, 1) * 1e6,
        per: n,
    }
    if per == "tasks":
        out.update(p50_ms=pct(lat, 50) * 1e3, p99_ms=pct(lat, 99) * 1e3)
        out["server_cpu_ms_per_task"] = w.server_cpu / max(n, 1) * 1e3
    else:
        out[f"server_cpu_us_per_{unit}"] = w.server_cpu / max(n, 1) * 1e6
    return out


async def w_lifecycle(srv: Running, plan: Plan) -> dict[str, Any]:
    """N sessions each looping task-augmented slow_compute(0) -> tasks/result."""
    sessions = await open_sessions(srv.port, plan.sessions)

    def step_of(s: Session) -> Step:
        async def step() -> None:
            task = await s.task_call(0)
            await s.call("tasks/result", {"taskId": task["taskId"]})

        return step

    lat, w = await _loop(srv, plan, [step_of(s) for s in sessions])
    for s in sessions:
        s.close()
    return _rates(lat, w, "tasks", 2)


async def w_wakeup(srv: Running, plan: Plan) -> dict[str, Any]:
    """slow_compute(s) then tasks/result at once: lateness after the work ends.

    Lateness = answer received - (tools/call sent + s). Sessions start staggered so
    the wake-ups do not coincide."""
    sessions = await open_sessions(srv.port, plan.sessions)
    late: list[float] = []
    secs = plan.wake_seconds
    await asyncio.gather(*(s.task_call(0) for s in sessions))  # warm every path once

    async def worker(i: int, s: Session) -> None:
        await asyncio.sleep(i * secs / len(sessions))
        for _ in range(plan.wake_rounds):
            t0 = time.perf_counter()
            task = await s.task_call(secs)
            await s.call("tasks/result", {"taskId": task["taskId"]})
            late.append((time.perf_counter() - t0 - secs) * 1e3)

    await asyncio.gather(*(worker(i, s) for i, s in enumerate(sessions)))
    for s in sessions:
        s.close()
    return {
        "p50_ms": pct(late, 50),
        "p99_ms": pct(late, 99),
        "max_ms": max(late),
        "samples": late,
    }


async def w_poll(srv: Running, plan: Plan) -> dict[str, Any]:
    """N sessions each polling tasks/get on its own (completed) task."""
    sessions = await open_sessions(srv.port, plan.sessions)
    tids = []
    for s in sessions:
        task = await s.task_call(0)
        await s.call("tasks/result", {"taskId": task["taskId"]})
        tids.append(task["taskId"])

    def step_of(s: Session, tid: str) -> Step:
        params = {"taskId": tid}
        return lambda: s.call("tasks/get", params)

    steps = [step_of(s, t) for s, t in zip(sessions, tids, strict=True)]
    lat, w = await _loop(srv, plan, steps)
    for s in sessions:
        s.close()
    return _rates(lat, w, "gets", 1)


async def _ext_clients(srv: Running, plan: Plan) -> list[Stateless] | None:
    """``plan.sessions`` stateless clients, or None when the server does not advertise the
    tasks extension in ``server/discover`` (the face is not served: its row shows "–")."""
    clients = [await Stateless(HOST, srv.port).open() for _ in range(plan.sessions)]
    if not await clients[0].advertises_tasks():
        for c in clients:
            c.close()
        return None
    return clients


NOT_SERVED = {"not_served": "server/discover does not advertise io.modelcontextprotocol/tasks"}


async def w_ext_lifecycle(srv: Running, plan: Plan) -> dict[str, Any]:
    """N stateless clients each looping slow_compute(0) as a task -> tasks/get until terminal."""
    clients = await _ext_clients(srv, plan)
    if clients is None:
        return dict(NOT_SERVED)

    def step_of(c: Stateless) -> Step:
        async def step() -> int:
            created = await c.task_call(0)
            before = c.sent
            done = await c.wait_terminal(created, EXT_POLL_PAUSE_S)
            if done.get("status", "completed") != "completed":
                raise RuntimeError(f"slow_compute(0) ended {done.get('status')}")
            return c.sent - before  # the task's gets

        return step

    gets: list[int] = []
    lat, w = await _loop(srv, plan, [step_of(c) for c in clients], outs=gets)
    for c in clients:
        c.close()
    per_task = sum(gets) / max(len(gets), 1)
    return {**_rates(lat, w, "tasks", 1 + per_task), "gets_per_task": per_task}


async def w_ext_poll(srv: Running, plan: Plan) -> dict[str, Any]:
    """N stateless clients each polling tasks/get on its own completed task."""
    clients = await _ext_clients(srv, plan)
    if clients is None:
        return dict(NOT_SERVED)
    tids = []
    for c in clients:
        created = await c.task_call(0)
        if created.get("resultType") != "task":  # answered at once: ask for a longer one
            created = await c.task_call(0.01)
        if created.get("resultType") != "task":
            raise RuntimeError(f"slow_compute(0.01) made no task: {created}")
        await c.wait_terminal(created, EXT_POLL_PAUSE_S)
        tids.append(created["taskId"])

    def step_of(c: Stateless, tid: str) -> Step:
        params = {"taskId": tid}
        return lambda: c.call("tasks/get", params)

    lat, w = await _loop(srv, plan, [step_of(c, t) for c, t in zip(clients, tids, strict=True)])
    for c in clients:
        c.close()
    return _rates(lat, w, "gets", 1)


async def _fill(s: Session, target: int, have: int) -> int:
    """Create completed tasks over the wire until ``target``, on all of ``s``'s connections."""
    todo = [target - have]

    async def worker(conn: int) -> None:
        while todo[0] > 0:
            todo[0] -= 1
            await s.task_call(0, conn)

    await asyncio.gather(*(worker(i) for i in range(len(s.conns))))
    return target


async def _settle(s: Session) -> None:
    """A few unmeasured list calls: the first ones after a bulk insert pay for the garbage
    collector's pass over the new objects, which is not what a page costs."""
    start = time.perf_counter()
    for _ in range(10):
        await s.call("tasks/list", {})
        if time.perf_counter() - start > 0.3:
            break


async def _first_page(s: Session, budget_s: float) -> tuple[float, int]:
    times: list[float] = []
    size = 0
    start = time.perf_counter()
    while not times or (
        len(times) < 25
        and (len(times) < 3 or time.perf_counter() - start < budget_s)
        and time.perf_counter() - start < 2.0  # one call of a slow peer is enough
    ):
        t0 = time.perf_counter()
        page = await s.call("tasks/list", {})
        times.append(time.perf_counter() - t0)
        size = len(page["tasks"])
        single = "nextCursor" not in page
    return statistics.median(times) * 1e3, size if not single else -size


async def _walk(s: Session, budget_s: float) -> tuple[float, int, int]:
    times: list[float] = []
    start = time.perf_counter()
    total = pages = 0
    while not times or (len(times) < 5 and time.perf_counter() - start < budget_s):
        t0 = time.perf_counter()
        total = pages = 0
        params: dict[str, Any] = {}
        while True:
            page = await s.call("tasks/list", params)
            total += len(page["tasks"])
            pages += 1
            cursor = page.get("nextCursor")
            if not cursor:
                break
            params = {"cursor": cursor}
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3, total, pages


def session_requestor(s: Session) -> str:
    """The requestor key our server binds a session's tasks to without bearer auth
    (``McpTasks.requestor_of``: ``session:<Mcp-Session-Id>``; ``subject:<sub>`` with a token)."""
    assert s.sid is not None
    return f"session:{s.sid}"


async def _insert(store_spec: str, requestor: str, n: int) -> None:
    """Write ``n`` completed ``slow_compute(0)`` tasks of ``requestor`` into the store our
    server runs on, through a second instance of it (``store_from_url``, the package's own
    store API on the same SQLite file or Redis database), as another server instance
    sharing that store would. Filling 100,000 tasks over the wire would take minutes."""
    from mcp_tasks.lifecycle import COMPLETED
    from mcp_tasks.runtime import store_from_url
    from mcp_tasks.runtime.engine.task_engine import EngineConfig
    from mcp_tasks.store import TaskRecord

    store = store_from_url(store_spec)
    poll_ms, now = EngineConfig().poll_interval_ms, time.time()
    result = {"content": [{"type": "text", "text": "done after 0s (no label)"}]}

    def record(i: int) -> TaskRecord:
        return TaskRecord(
            task_id=secrets.token_urlsafe(16),
            requestor=requestor,
            method="tools/call",
            status=COMPLETED,
            created_at=now + i * 1e-6,
            last_updated_at=now,
            ttl_ms=3_600_000,
            poll_interval_ms=poll_ms,
            result=dict(result),
        )

    try:  # 256 at a time: SQLite commits them as one group, Redis overlaps the round trips
        for start in range(0, n, 256):
            batch = range(start, min(n, start + 256))
            await asyncio.gather(*(store.create(record(i)) for i in batch))
    finally:
        await store.close()


async def _heap(srv: Running) -> int | None:
    """Node only: full GC, then heapUsed (RSS is read after the GC too)."""
    if not srv.spec.heap_hook:
        return None
    reader, writer = await asyncio.open_connection(HOST, srv.port)
    writer.write(f"GET /bench/heap HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n".encode())
    data = await reader.read()
    writer.close()
    return int(json.loads(data.split(b"\r\n\r\n", 1)[1])["heapUsed"])


async def w_list(srv: Running, plan: Plan, rep: int = 0) -> dict[str, Any]:
    """Retained completed tasks in one session: first page and whole walk at each N; RSS."""
    s = await Session(HOST, srv.port).open(8)
    have = await _fill(s, 50, 0)  # warm every code path before the RSS baseline
    await asyncio.sleep(0.2)
    heap0 = await _heap(srv)
    rss0, n0 = srv.rss_bytes(), have
    heaps = []
    points: dict[str, Any] = {}
    budget = 0.5 if plan.fresh_process else 0.1
    sizes = [(n, False) for n in plan.list_sizes]
    store = srv.store
    if srv.spec.shared_store and store and plan.big_list and rep < plan.big_list_reps:
        sizes.append((plan.big_list, True))
    rss_points = []
    for n, by_prefill in sizes:
        if by_prefill:
            assert store is not None
            await _insert(store, session_requestor(s), n - have)
            have = n
        else:
            have = await _fill(s, n, have)
        await asyncio.sleep(0.3)  # let the last works finish
        heap = await _heap(srv)
        heaps.append((n, heap))
        rss = srv.rss_bytes()
        rss_points.append((n, rss))
        await _settle(s)
        first_ms, page_size = await _first_page(s, budget)
        if page_size < 0:  # the first page held every task: the walk is that one call
            page_size = walk_total = -page_size
            walk_ms, total, pages = first_ms, walk_total, 1
        else:
            walk_ms, total, pages = await _walk(s, budget)
        points[str(n)] = {
            "first_page_ms": first_ms,
            "page_size": page_size,
            "walk_ms": walk_ms,
            "walk_tasks": total,
            "walk_pages": pages,
            "rss_bytes": rss,
            "prefilled": by_prefill,
        }
    s.close()
    wire = [(n, r) for (n, r), (_, pre) in zip(rss_points, sizes, strict=True) if not pre]
    (n_a, r_a), (n_b, r_b) = ((n0, rss0), wire[-1]) if len(wire) < 2 else (wire[0], wire[-1])
    out: dict[str, Any] = {
        "points": points,
        "bytes_per_task": (r_b - r_a) / max(n_b - n_a, 1),
        "bytes_per_task_span": [n_a, n_b],
    }
    if heap0 is not None and heaps and heaps[-1][1] is not None:
        out["heap_bytes_per_task"] = (heaps[-1][1] - heap0) / max(heaps[-1][0] - n0, 1)
    big = [(n, r) for (n, r), (_, pre) in zip(rss_points, sizes, strict=True) if pre]
    if big:
        out["bytes_per_task_prefilled"] = (big[0][1] - r_b) / max(big[0][0] - n_b, 1)
    return out


async def _counts(srv: Running) -> dict[str, int]:
    """The store's round trips so far (``counted.py``: asked for with ``SIGUSR1``), and with
    Redis the commands Redis ran (``INFO commandstats``: those inside scripts too)."""
    path = srv.spec.counts
    assert path is not None
    seq = json.loads(path.read_text())["seq"] if path.exists() else 0
    os.kill(srv.pid, signal.SIGUSR1)
    for _ in range(400):
        if path.exists() and (got := json.loads(path.read_text()))["seq"] > seq:
            break
        await asyncio.sleep(0.01)
    else:
        raise RuntimeError(f"{srv.spec.name}: no counts in {path}")
    out: dict[str, int] = {k: v for k, v in got.items() if k != "seq"}
    if srv.spec.needs_redis:
        out["redis_ran"] = await redis_commands_ran(int(os.environ["BENCH_REDIS_PORT"]))
    return out


def _per(before: dict[str, int], after: dict[str, int], n: int) -> dict[str, float]:
    return {k: (after[k] - before[k]) / max(n, 1) for k in after}


async def w_counts(srv: Running, plan: Plan) -> dict[str, Any]:
    """What one lifecycle and one ``tasks/get`` cost the store, counted (``counted.py``) on
    a server of its own, one session, one request at a time: SQLite statements and
    commits, Redis pipelines (round trips) and commands sent, and the commands Redis ran.
    The lifecycle as the timed windows run it (past the retention cap: each creation drops
    the oldest finished task); ``tasks/get`` on a task that ended over a second before
    (no longer the record its work stored a moment ago)."""
    s = await Session(HOST, srv.port).open(1)
    try:
        for _ in range(plan.count_warm):
            task = await s.task_call(0)
            await s.call("tasks/result", {"taskId": task["taskId"]})
        c0 = await _counts(srv)
        for _ in range(plan.count_tasks):
            task = await s.task_call(0)
            await s.call("tasks/result", {"taskId": task["taskId"]})
        c1 = await _counts(srv)
        params = {"taskId": task["taskId"]}
        await asyncio.sleep(1.2)  # past the second a record stored here is kept (RECENT_S)
        gets, c2 = 0, await _counts(srv)
        deadline = time.perf_counter() + plan.count_gets_s
        while time.perf_counter() < deadline:
            await s.call("tasks/get", params)
            gets += 1
        c3 = await _counts(srv)
    finally:
        s.close()
    return {
        "lifecycle": _per(c0, c1, plan.count_tasks),
        "get": _per(c2, c3, gets),
        "tasks": plan.count_tasks,
        "gets": gets,
    }


Workload = Callable[[Running, Plan], Awaitable[dict[str, Any]]]
WORKLOADS: dict[str, Workload] = {
    "lifecycle": w_lifecycle,
    "wakeup": w_wakeup,
    "list": w_list,
    "poll": w_poll,
}
EXT_WORKLOADS: dict[str, Workload] = {
    "ext_lifecycle": w_ext_lifecycle,
    "ext_poll": w_ext_poll,
}


def workloads_of(spec: ServerSpec) -> dict[str, Workload]:
    every = EXT_WORKLOADS if spec.face == EXT else WORKLOADS
    if spec.workloads is None:
        return every
    return {k: v for k, v in every.items() if k in spec.workloads}
