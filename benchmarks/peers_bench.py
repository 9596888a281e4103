"""End-to-end benchmark against the peers, side by side. One command:

    .venv/bin/python benchmarks/peers_bench.py            # setup + full run (< 10 minutes)
    .venv/bin/python benchmarks/peers_bench.py --quick    # a few seconds, tiny sizes (tests)

Servers (each workload on a fresh process, bound to 127.0.0.1 on a free port):

- ``ts``: ``benchmarks/peers/ts/server.mjs``, @modelcontextprotocol/sdk 1.32.2 experimental
  tasks (``InMemoryTaskStore``, ``registerToolTask``), installed with ``npm ci``;
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
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime
from operator import itemgetter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PEERS = HERE / "peers"
TS_DIR = PEERS / "ts"
VENV129 = PEERS / ".venv-mcp129"
PY129 = VENV129 / "bin" / "python"
RESULTS = HERE / "results"
README = HERE / "README.md"  # benchmarks/README.md: the tables live there
README_START, README_END = "<!-- peers-bench:start -->", "<!-- peers-bench:end -->"
sys.path.insert(0, str(PEERS))
sys.path.insert(0, str(ROOT / "tests"))  # testkit: the FastMCP peer's venv (fastmcp_peer)

import scaleout  # noqa: E402
from driver import RpcError, Session, Stateless  # noqa: E402

from testkit import fastmcp_peer  # noqa: E402

HOST = "127.0.0.1"
#: The flags our example server runs with beyond ``--http`` and ``--store`` (reported).
OURS_FLAGS = ("--rate-limit", "1000000/1")
TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")
TS = "ts"
CORE, EXT = "2025-11-25", "2026-07-28"  # the face a server is measured on
FASTMCP = "fastmcp"
CEILING = "ceiling"
OURS_MEMORY = "ours-memory"  # the example server as shipped, memory store
OURS_H11 = "ours-h11"  # the example server on uvicorn's h11 + plain asyncio (--http-stack h11)
EXT_POLL_PAUSE_S = 0.005  # between two tasks/get of the ext lifecycle (no blocking result)


# --------------------------------------------------------------------------- settings
@dataclass
class Plan:
    reps: int = 3
    sessions: int = 8
    warmup_s: float = 0.5
    window_s: float = 2.0
    wake_seconds: float = 0.5
    wake_rounds: int = 5
    list_sizes: tuple[int, ...] = (1000, 5000)
    big_list: int = 100_000
    big_list_reps: int = 1  # 100,000-task rows in the first repetition only (time budget)
    list_reps: int = 2  # filling 5,000 tasks over the wire is the slowest part of a repetition
    fresh_process: bool = True


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
)


# --------------------------------------------------------------------------- servers
@dataclass
class ServerSpec:
    name: str
    label: str
    argv: Callable[[int, Path], list[str]]
    #: ours: the ``--store`` value on (port, tmp dir); None for the other servers
    store: Callable[[int, Path], str] | None = None
    #: the 100,000-task list row is written through a second instance of ``store`` (a store
    #: that instances share: an SQLite file, a Redis database)
    shared_store: bool = False
    needs_redis: bool = False  # CPU and RSS include the redis-server's
    heap_hook: bool = False  # GET /bench/heap: full GC, then process.memoryUsage() (node)
    missing: str | None = None  # why it cannot run here
    env: dict[str, str] = field(default_factory=dict)
    face: str = CORE  # CORE: 2025-11-25 sessions; EXT: 2026-07-28 tasks extension, stateless
    workloads: tuple[str, ...] | None = None  # a subset of its face's workloads (None: all)


def uvicorn_auto_stack() -> str:
    """What uvicorn's ``http="auto"`` and ``loop="auto"`` pick in this virtualenv (the
    servers run on ``sys.executable``): httptools and uvloop when they import."""
    from importlib.util import find_spec

    http = "httptools" if find_spec("httptools") else "h11"
    loop = "uvloop" if find_spec("uvloop") else "asyncio"
    return f"{http} + {loop}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def redis_store_spec() -> tuple[str | None, str | None]:
    """(``--store`` prefix for Redis, why not) when the runtime ships a Redis store."""
    try:
        import mcp_tasks.runtime as rt
    except ImportError as exc:
        return None, str(exc)
    if not (Path(rt.__file__).parent / "redis").is_dir():
        return None, "no templates/runtime/redis/ yet (no Redis store in this runtime)"
    if shutil.which("redis-server") is None:
        return None, "redis-server not installed"
    return "redis://", None


def ours_argv(port: int, store: str | None = None, *extra: str) -> list[str]:
    """The command line of our example server as shipped on ``port`` (``--store`` when
    one is named), with ``OURS_FLAGS`` and ``extra``."""
    argv = [sys.executable, "-m", "mcp_tasks.examples.server", "--http", f"{HOST}:{port}"]
    return [*argv, *OURS_FLAGS, *extra] + ([] if store is None else ["--store", store])


def sqlite_store(port: int, tmp: Path) -> str:
    return f"sqlite:{tmp / f'tasks-{port}.db'}"


def redis_store(port: int, tmp: Path) -> str:
    return f"redis://127.0.0.1:{os.environ.get('BENCH_REDIS_PORT', '6379')}/0"


def server_specs(tmp: Path, quick: bool) -> list[ServerSpec]:
    py = sys.executable
    specs = [
        ServerSpec(
            TS,
            "TypeScript SDK 1.32.2 (InMemoryTaskStore)",
            lambda port, _: [
                "node",
                "--expose-gc",
                str(TS_DIR / "server.mjs"),
                "--port",
                str(port),
            ],
            heap_hook=True,
            missing=(
                None
                if (TS_DIR / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir()
                and shutil.which("node")
                else "node_modules missing (run without --skip-setup)"
            ),
        ),
        ServerSpec(
            "mcp129",
            "mcp 1.29.0 (experimental tasks)",
            lambda port, _: [str(PY129), str(PEERS / "mcp129" / "server.py"), "--port", str(port)],
            missing=None if PY129.exists() else "benchmarks/peers/.venv-mcp129 missing",
        ),
        ServerSpec(
            "floor",
            "floor: mcp 2.3 + thinnest tasks",
            lambda port, _: [py, str(PEERS / "floor_server.py"), "--port", str(port)],
        ),
        ServerSpec(
            "floor-sdk",
            "floor + SDK tools/call path",
            lambda port, _: [py, str(PEERS / "floor_server.py"), "--port", str(port), "--sdk-tool"],
        ),
        ServerSpec(
            CEILING,
            f"ceiling: raw ASGI, uvicorn defaults ({uvicorn_auto_stack()})",
            lambda port, _: [py, str(PEERS / "ceiling_server.py"), "--port", str(port)],
            workloads=("lifecycle", "wakeup", "poll"),
        ),
        ServerSpec(
            "ours-memory",
            f"ours (shipped default: {uvicorn_auto_stack()}), InMemoryTaskStore",
            lambda port, _: ours_argv(port),
            store=lambda _port, _tmp: "memory",
        ),
        ServerSpec(
            OURS_H11,
            "ours (h11 + asyncio: `--http-stack h11`), InMemoryTaskStore",
            lambda port, _: ours_argv(port, None, "--http-stack", "h11"),
            workloads=("lifecycle", "wakeup", "poll"),
        ),
        ServerSpec(
            "ours-sqlite",
            "ours, SqliteTaskStore",
            lambda port, d: ours_argv(port, sqlite_store(port, d)),
            store=sqlite_store,
            shared_store=True,
        ),
    ]
    specs += ext_specs()
    _redis_prefix, why = redis_store_spec()
    specs.append(
        ServerSpec(
            "ours-redis",
            "ours, RedisTaskStore",
            lambda port, d: ours_argv(port, redis_store(port, d)),
            store=redis_store,
            shared_store=True,
            missing=why,
            needs_redis=True,
        )
    )
    return specs


def ext_specs() -> list[ServerSpec]:
    """The servers measured on the 2026-07-28 tasks extension face."""
    return [
        ServerSpec(
            FASTMCP,
            "FastMCP 4.1.4 + fastmcp-tasks (Docket memory://)",
            lambda port, _: [
                str(fastmcp_peer.venv_python()),
                str(fastmcp_peer.SERVER_SCRIPT),
                str(port),
                "--json",
            ],
            missing=None if fastmcp_peer.is_ready() else "tests/interop/.venv-fastmcp missing",
            face=EXT,
        ),
        ServerSpec(
            "ours-ext",
            "ours, extension face (InMemoryTaskStore)",
            lambda port, _: ours_argv(port),
            face=EXT,
        ),
    ]


def proc_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * TICK_S  # utime + stime


def proc_rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class RedisServer:
    """One throw-away redis-server for the ours-redis rows, flushed before each server start."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0

    async def start(self) -> None:
        self.port = free_port()
        os.environ["BENCH_REDIS_PORT"] = str(self.port)
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                HOST,
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(200):
            with contextlib.suppress(OSError):
                await self.flush()
                return
            await asyncio.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    async def flush(self) -> None:
        reader, writer = await asyncio.open_connection(HOST, self.port)
        writer.write(b"*1\r\n$8\r\nFLUSHALL\r\n")
        line = await reader.readline()
        writer.close()
        if not line.startswith(b"+OK"):
            raise OSError(f"FLUSHALL: {line!r}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(5)


REDIS = RedisServer()


class Running:
    """A server process: its pid, port, CPU ticks and RSS from /proc."""

    def __init__(self, spec: ServerSpec, tmp: Path) -> None:
        self.spec, self.tmp = spec, tmp
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.log = tmp / f"{spec.name}.log"

    @property
    def store(self) -> str | None:
        """Our server's ``--store`` value (None for the other servers)."""
        return None if self.spec.store is None else self.spec.store(self.port, self.tmp)

    async def start(self) -> Running:
        if self.spec.needs_redis:
            await REDIS.flush()
        for _attempt in range(3):
            self.port = free_port()
            env = dict(os.environ, **self.spec.env)
            with open(self.log, "ab") as log:
                self.proc = subprocess.Popen(
                    self.spec.argv(self.port, self.tmp),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=env,
                    cwd=str(ROOT),
                )
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    _r, w = await asyncio.open_connection(HOST, self.port)
                    w.close()
                    return self
                except OSError:
                    await asyncio.sleep(0.05)
            self.stop()
        raise RuntimeError(f"{self.spec.name} did not start; see {self.log}")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def pids(self) -> list[int]:
        if self.spec.needs_redis and REDIS.proc is not None:
            return [self.pid, REDIS.proc.pid]
        return [self.pid]

    def cpu_s(self) -> float:
        return sum(proc_cpu_s(pid) for pid in self.pids())

    def rss_bytes(self) -> int:
        return sum(proc_rss_bytes(pid) for pid in self.pids())

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


# --------------------------------------------------------------------------- helpers
def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    k = min(len(s) - 1, max(0, round(q / 100 * (len(s) - 1))))
    return s[k]


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


# --------------------------------------------------------------------------- workloads
Step = Callable[[], Awaitable[Any]]


async def _loop(srv: Running, plan: Plan, steps: list[Step]) -> tuple[list[float], Window]:
    """Each step in a loop of its own; the latencies of the steps ended inside the window."""
    state = {"measure": False, "stop": False}
    lat: list[float] = []

    async def run(step: Step) -> None:
        while not state["stop"]:
            t0 = time.perf_counter()
            await step()
            if state["measure"]:
                lat.append(time.perf_counter() - t0)

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
    gets = [0]

    def step_of(c: Stateless) -> Step:
        async def step() -> None:
            created = await c.task_call(0)
            before = c.sent
            done = await c.wait_terminal(created, EXT_POLL_PAUSE_S)
            gets[0] += c.sent - before
            if done.get("status", "completed") != "completed":
                raise RuntimeError(f"slow_compute(0) ended {done.get('status')}")

        return step

    lat, w = await _loop(srv, plan, [step_of(c) for c in clients])
    for c in clients:
        c.close()
    tasks = max(len(lat), 1)
    return {**_rates(lat, w, "tasks", 1 + gets[0] / tasks), "gets_per_task": gets[0] / tasks}


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
    from mcp_tasks.runtime.engine import EngineConfig
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


async def run_all(specs: list[ServerSpec], plan: Plan, tmp: Path) -> dict[str, Any]:
    names = [s.name for s in specs]
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {
        w: {n: [] for n in names} for w in {**WORKLOADS, **EXT_WORKLOADS}
    }
    errors: list[str] = []
    if any(s.needs_redis for s in specs):
        await REDIS.start()
    try:
        await _run_reps(specs, plan, tmp, names, runs, errors)
    finally:
        REDIS.stop()
    return {"runs": runs, "errors": errors}


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
                    except (RuntimeError, RpcError, OSError, asyncio.IncompleteReadError) as exc:
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
                srv = await Running(spec, tmp).start()
                try:
                    for workload, fn in workloads_of(spec).items():
                        runs[workload][name].append(await fn(srv, plan))
                        print(
                            f"{workload:9s} {name:12s} "
                            + summary(workload, runs[workload][name][-1])
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


# --------------------------------------------------------------------------- aggregate
def med(values: list[float]) -> float | None:
    vals = [v for v in values if v is not None and v == v]
    return statistics.median(vals) if vals else None


#: Throughput workloads: (rate, server CPU per operation, other medians reported).
RATE_KEYS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "lifecycle": (
        "tasks_per_s",
        "server_cpu_ms_per_task",
        ("p50_ms", "p99_ms", "driver_cpu_us_per_req", "server_cpu_util"),
    ),
    "poll": ("gets_per_s", "server_cpu_us_per_get", ("driver_cpu_us_per_req",)),
}


def aggregate(runs: dict[str, dict[str, list[dict[str, Any]]]], names: list[str]) -> dict[str, Any]:
    """Medians over repetitions; ratios to ts computed per repetition, then the median."""
    agg: dict[str, Any] = {}

    def ratio(
        workload: str, name: str, getter: Callable[[dict[str, Any]], float], to: str = TS
    ) -> float | None:
        mine, theirs = runs[workload].get(name, []), runs[workload].get(to, [])
        pairs = zip(mine, theirs, strict=False)
        return med([getter(a) / getter(b) for a, b in pairs if "not_served" not in a and getter(b)])

    def cross(
        key: str, workload: str, name: str, getter: Callable[[dict[str, Any]], float]
    ) -> float | None:
        mine, theirs = runs[key].get(name, []), runs[workload].get(TS, [])
        pairs = zip(mine, theirs, strict=False)
        return med([getter(a) / getter(b) for a, b in pairs if "not_served" not in a and getter(b)])

    for name in names:
        row: dict[str, Any] = {}
        for workload, (rate, cpu, extra) in RATE_KEYS.items():
            for key, ref, floor in ((workload, TS, "floor"), (f"ext_{workload}", FASTMCP, None)):
                done = [r for r in runs[key][name] if "not_served" not in r]
                if runs[key][name] and not done:
                    row[f"{key}.not_served"] = runs[key][name][0]["not_served"]
                if not done:
                    continue
                for k in (rate, cpu, *extra, "gets_per_task"):
                    if all(k in r for r in done):
                        row[f"{key}.{k}"] = med([r[k] for r in done])
                row[f"{key}.x_{ref}"] = ratio(key, name, itemgetter(rate), ref)
                # both faces against the TypeScript server's 2025-11-25 figures, per repetition
                row[f"{key}.x_ts_face"] = cross(key, workload, name, itemgetter(rate))
                row[f"{key}.cpu_x_ts"] = cross(key, workload, name, itemgetter(cpu))
                row[f"{key}.x_memory"] = ratio(key, name, itemgetter(rate), OURS_MEMORY)
                if floor:
                    row[f"{key}.cpu_x_floor"] = ratio(key, name, itemgetter(cpu), floor)
                    row[f"{key}.x_{CEILING}"] = ratio(key, name, itemgetter(rate), CEILING)
        wk = runs["wakeup"][name]
        if wk:
            row["wakeup.p50_ms"] = med([r["p50_ms"] for r in wk])
            row["wakeup.p99_ms"] = med([r["p99_ms"] for r in wk])
            row["wakeup.x_ts"] = ratio("wakeup", name, lambda r: r["p99_ms"])
        ls = runs["list"][name]
        if ls:
            row["memory.bytes_per_task"] = med([r["bytes_per_task"] for r in ls])
            row["memory.x_ts"] = ratio("list", name, lambda r: r["bytes_per_task"])
            pre = [r["bytes_per_task_prefilled"] for r in ls if "bytes_per_task_prefilled" in r]
            row["memory.bytes_per_task_prefilled"] = med(pre)
            heap = [r["heap_bytes_per_task"] for r in ls if "heap_bytes_per_task" in r]
            row["memory.heap_bytes_per_task"] = med(heap)
            for n in ls[0]["points"]:
                for key in ("first_page_ms", "walk_ms", "page_size", "walk_tasks"):
                    row[f"list.{n}.{key}"] = med(
                        [r["points"][n][key] for r in ls if n in r["points"]]
                    )
        agg[name] = row
    return agg


def fmt(v: Any, digits: int = 1) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        if abs(v) >= 100:
            return f"{v:,.0f}"
        return f"{v:.{digits}f}"
    return str(v)


Check = tuple[str, str, Callable[[dict[str, Any]], Any], Callable[[Any], bool]]


def _checks(plan: Plan) -> list[Check]:
    """(servers it applies to, target, value getter, met?) -- the issue's targets; ratios are
    medians of per-repetition ratios (same run). ``servers``: "core" (ours on the 2025-11-25
    face), "shipped" (the example server's shipped default, memory store), "ext" (the
    extension face), "sqlite", "redis"."""
    first, last, big = (str(n) for n in (plan.list_sizes[0], plan.list_sizes[-1], plan.big_list))

    def flat(row: dict[str, Any]) -> float | None:
        small, large = row.get(f"list.{first}.first_page_ms"), row.get(f"list.{big}.first_page_ms")
        return None if small is None or large is None else large / small

    def get(key: str) -> Callable[[dict[str, Any]], Any]:
        return lambda r: r.get(key)

    at_least, at_most = (lambda x: lambda v: v >= x), (lambda x: lambda v: v <= x)
    return [
        ("shipped", "lifecycle ≥ 2.0 × TS (8 sessions)", get("lifecycle.x_ts"), at_least(2.0)),
        ("shipped", "lifecycle server CPU/task ≤ 0.5 × TS", get("lifecycle.cpu_x_ts"), at_most(0.5)),
        ("shipped", "tasks/get ≥ 2.0 × TS (8 sessions)", get("poll.x_ts"), at_least(2.0)),
        ("shipped", "tasks/get server CPU ≤ 0.5 × TS", get("poll.cpu_x_ts"), at_most(0.5)),
        ("shipped", "lifecycle × ceiling (reported)", get("lifecycle.x_ceiling"), lambda v: True),
        ("shipped", "tasks/get × ceiling (reported)", get("poll.x_ceiling"), lambda v: True),
        ("ext", "lifecycle ≥ 2.0 × TS's 2025-11-25 lifecycle", get("ext_lifecycle.x_ts_face"), at_least(2.0)),
        ("ext", "lifecycle server CPU/task ≤ 0.5 × TS", get("ext_lifecycle.cpu_x_ts"), at_most(0.5)),
        ("ext", "tasks/get ≥ 2.0 × TS's 2025-11-25 tasks/get", get("ext_poll.x_ts_face"), at_least(2.0)),
        ("ext", "tasks/get server CPU ≤ 0.5 × TS", get("ext_poll.cpu_x_ts"), at_most(0.5)),
        ("core", "wake-up p99 < 5 ms", get("wakeup.p99_ms"), lambda v: v < 5),
        ("core", f"list first page < 2 ms at {int(last):,} (ms)", get(f"list.{last}.first_page_ms"), lambda v: v < 2),
        ("sqlite redis", f"list first page flat {int(first):,} → {int(big):,} (ratio ≤ 1.5)", flat, at_most(1.5)),
        ("shipped", "memory < 1.5 KB RSS per retained task (bytes)", get("memory.bytes_per_task"), lambda v: v < 1536),
        ("sqlite", "lifecycle ≥ 0.6 × the memory store's", get("lifecycle.x_memory"), at_least(0.6)),
        ("redis", "lifecycle ≥ 0.5 × the memory store's", get("lifecycle.x_memory"), at_least(0.5)),
    ]  # fmt: skip


def _kind(name: str, ext: Collection[str]) -> str:
    if name in ext:
        return "ext"
    return {OURS_MEMORY: "shipped", "ours-sqlite": "sqlite", "ours-redis": "redis"}.get(name, "")


def targets(agg: dict[str, Any], plan: Plan, ext: Collection[str] = ()) -> list[dict[str, Any]]:
    """The issue's targets for each of our servers, the floor server's figure beside (a
    target the floor misses too is out of reach on the SDK's transport here)."""
    out: list[dict[str, Any]] = []
    floor = agg.get("floor", {})
    for name in [n for n in agg if n.startswith("ours-") and n != OURS_H11]:
        kind = _kind(name, ext)
        for applies, what, get, ok in _checks(plan):
            if kind not in applies.split() and not (applies == "core" and kind != "ext"):
                continue
            value = get(agg[name])
            met = None if value is None else bool(ok(value))
            fvalue = get(floor) if floor and kind != "ext" and "memory store" not in what else None
            note = ""
            if "reported" in what:
                met = None
            elif met is False and fvalue is not None and not ok(fvalue):
                note = "the floor misses it too"
            elif value is None and what.startswith("list first page flat"):
                note = f"no {int(plan.big_list):,}-task row"
            out.append(
                {"server": name, "target": what, "value": value, "met": met, "floor": fvalue,
                 "floor_met": None if fvalue is None else bool(ok(fvalue)), "note": note}
            )  # fmt: skip
    return out


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


def markdown(report: dict[str, Any]) -> str:
    agg, plan, specs = report["aggregate"], report["plan"], report["servers"]
    names = [s["name"] for s in specs if s["name"] in agg and s.get("face", CORE) == CORE]
    label = {s["name"]: s["label"] for s in specs}
    m = report["machine"]
    load = m["loadavg_before"]
    lines = [
        f"Run {report['date']} on {m['cpu']} ({m['cores']} cores, Linux {m['kernel']}), "
        f"Python {m['python']}, Node {m['node']}; {plan['reps']} repetitions, medians; "
        f"load average before the run {load[0]:.1f} / after {report['loadavg_after'][0]:.1f}"
        + (
            " — **taken while other jobs shared the machine**: absolute figures are pessimistic, "
            "ratios taken within each repetition are the fairer comparison."
            if load[0] > 0.5 * (m["cores"] or 1)
            else "."
        ),
        "",
        "Ours is the example server as users run it (`python -m mcp_tasks.examples.server "
        "--http HOST:PORT [--store ...]`) with its shipped defaults, SSE responses and "
        f"`--http-stack auto` ({uvicorn_auto_stack()} here) included, "
        f"and `{' '.join(report.get('ours_flags', OURS_FLAGS))}` (the default rate limit, "
        "1,000 task requests per requestor per 10 s, would cap polling at 100 gets/s per "
        "session; `--max-active` is left at its default).",
        "",
        f"**Lifecycle** ({plan['sessions']} sessions looping task-augmented `slow_compute(0)` → `tasks/result`, "
        f"{plan['window_s']:g} s window; CPU from `/proc/PID/stat`)",
        "",
        "| server | tasks/s | × TS | × ceiling | p50 ms | p99 ms | server CPU ms/task "
        "| CPU × floor | server CPU use | driver CPU µs/req |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for n in names:
        r = agg[n]
        util = r.get("lifecycle.server_cpu_util")
        lines.append(
            f"| {label[n]} | {fmt(r.get('lifecycle.tasks_per_s'))} | {fmt(r.get('lifecycle.x_ts'), 2)} | "
            f"{fmt(r.get('lifecycle.x_ceiling'), 2)} | "
            f"{fmt(r.get('lifecycle.p50_ms'), 2)} | {fmt(r.get('lifecycle.p99_ms'), 2)} | "
            f"{fmt(r.get('lifecycle.server_cpu_ms_per_task'), 3)} | "
            f"{fmt(r.get('lifecycle.cpu_x_floor'), 2)} | {'–' if util is None else f'{util:.0%}'} | "
            f"{fmt(r.get('lifecycle.driver_cpu_us_per_req'))} |"
        )
    lines += [
        "",
        f"**Wake-up** (`slow_compute({plan['wake_seconds']:g})` then `tasks/result` at once; lateness = answer − "
        f"(call sent + {plan['wake_seconds']:g} s); {plan['sessions']} staggered sessions × {plan['wake_rounds']} rounds) "
        f"and **poll** ({plan['sessions']} sessions looping `tasks/get`)",
        "",
        "| server | wake p50 ms | wake p99 ms | gets/s | × TS | × ceiling | server CPU µs/get "
        "| CPU × floor | driver CPU µs/req |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for n in names:
        r = agg[n]
        lines.append(
            f"| {label[n]} | {fmt(r.get('wakeup.p50_ms'), 2)} | {fmt(r.get('wakeup.p99_ms'), 2)} | "
            f"{fmt(r.get('poll.gets_per_s'))} | {fmt(r.get('poll.x_ts'), 2)} | "
            f"{fmt(r.get('poll.x_ceiling'), 2)} | "
            f"{fmt(r.get('poll.server_cpu_us_per_get'))} | {fmt(r.get('poll.cpu_x_floor'), 2)} | "
            f"{fmt(r.get('poll.driver_cpu_us_per_req'))} |"
        )
    sizes = [str(n) for n in plan["list_sizes"]] + [str(plan["big_list"])]
    head = " | ".join(f"first page @{int(n):,}" for n in sizes)
    walk = " | ".join(f"walk @{int(n):,}" for n in sizes)
    lines += [
        "",
        f"**List** ({plan['list_reps']} repetitions; retained completed tasks in one session, "
        f"ms; the others are created over the wire; the {int(sizes[-1]):,} tasks are written "
        "into the SQLite file or Redis database our server runs on, through a second instance "
        "of the package's store (as another server instance sharing it would), in the first "
        "repetition only; the in-memory store cannot be reached from outside its server and "
        "filling it over the wire would take minutes, so it has no such row)",
        "",
        f"| server | page size | {head} | {walk} |",
        "| --- | ---: | " + " | ".join(["---:"] * (2 * len(sizes))) + " |",
    ]
    listed = [n for n in names if f"list.{sizes[0]}.first_page_ms" in agg[n]]
    for n in listed:
        r = agg[n]
        firsts = " | ".join(fmt(r.get(f"list.{s}.first_page_ms"), 2) for s in sizes)
        walks = " | ".join(fmt(r.get(f"list.{s}.walk_ms"), 1) for s in sizes)
        lines.append(
            f"| {label[n]} | {fmt(r.get(f'list.{sizes[0]}.page_size'))} | {firsts} | {walks} |"
        )
    lines += [
        "",
        f"**Memory** ({plan['list_reps']} repetitions; server RSS growth per retained completed task; "
        "Redis rows include "
        "redis-server's RSS; the TypeScript server's RSS is read after a full GC, and its V8 "
        "heap growth is shown too)",
        "",
        f"| server | RSS bytes/task {int(sizes[0]):,} → {int(sizes[-2]):,} | × TS | "
        f"RSS bytes/task {int(sizes[-2]):,} → {int(sizes[-1]):,} (inserted) | heap bytes/task |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for n in listed:
        r = agg[n]
        lines.append(
            f"| {label[n]} | {fmt(r.get('memory.bytes_per_task'))} | {fmt(r.get('memory.x_ts'), 2)} | "
            f"{fmt(r.get('memory.bytes_per_task_prefilled'))} | "
            f"{fmt(r.get('memory.heap_bytes_per_task'))} |"
        )
    lines += ext_markdown(report)
    if report.get("scaleout"):
        lines += [
            "",
            "**Scale-out** (the example server on one Redis with `--workers N --stateless "
            "--tokens FILE`, 8 bearer-token clients looping task-augmented `slow_compute(0)` → "
            "`tasks/get` until terminal → `tasks/result`; driver, Redis and workers share this "
            "machine's cores)",
            "",
            scaleout.markdown(report["scaleout"]),
        ]
    lines += ["", "**Targets** for our server, the floor server's figure beside", ""]
    lines += [
        "| server | target | ours | met | floor | note |",
        "| --- | --- | ---: | :---: | ---: | --- |",
    ]
    for t in report["targets"]:
        met = {True: "yes", False: "**no**", None: "–"}[t["met"]]
        lines.append(
            f"| {t['server']} | {t['target']} | {fmt(t['value'], 2)} | {met} | {fmt(t['floor'], 2)} | {t['note']} |"
        )
    skipped = [f"{s['name']} ({s['missing']})" for s in specs if s.get("missing")]
    if skipped:
        lines += ["", "Not run: " + "; ".join(skipped) + "."]
    if report["errors"]:
        lines += ["", "Errors: " + "; ".join(report["errors"])]
    return "\n".join(lines) + "\n"


def ext_markdown(report: dict[str, Any]) -> list[str]:
    """The table of the 2026-07-28 tasks extension face ("–" where a server does not serve it)."""
    agg, plan, specs = report["aggregate"], report["plan"], report["servers"]
    ext = [s for s in specs if s.get("face") == EXT and s["name"] in agg]
    if not ext:
        return []
    lines = [
        "",
        f"**Extension face** (2026-07-28 tasks extension, stateless: {plan['sessions']} clients looping "
        f"`slow_compute(0)` as a task → `tasks/get` every {EXT_POLL_PAUSE_S * 1e3:g} ms until terminal, "
        f"and looping `tasks/get` on a completed task; ratios to FastMCP 4 per repetition)",
        "",
        "| server | tasks/s | × FastMCP | p50 ms | p99 ms | gets/task | server CPU ms/task "
        "| gets/s | × FastMCP | server CPU µs/get |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for s in ext:
        r = agg[s["name"]]
        why = r.get("ext_lifecycle.not_served") or r.get("ext_poll.not_served")
        label = s["label"] + (f" (not served yet: {why})" if why else "")
        lines.append(
            f"| {label} | {fmt(r.get('ext_lifecycle.tasks_per_s'))} | "
            f"{fmt(r.get('ext_lifecycle.x_fastmcp'), 2)} | {fmt(r.get('ext_lifecycle.p50_ms'), 2)} | "
            f"{fmt(r.get('ext_lifecycle.p99_ms'), 2)} | {fmt(r.get('ext_lifecycle.gets_per_task'))} | "
            f"{fmt(r.get('ext_lifecycle.server_cpu_ms_per_task'), 3)} | "
            f"{fmt(r.get('ext_poll.gets_per_s'))} | {fmt(r.get('ext_poll.x_fastmcp'), 2)} | "
            f"{fmt(r.get('ext_poll.server_cpu_us_per_get'))} |"
        )
    return lines


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


def scale_targets(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    two = next((r for r in rows if r["workers"] == 2), None)
    if two is None:
        return []
    value = two.get("x_1_worker")
    return [
        {"server": "ours-redis ×2 workers", "target": "two workers ≥ 1.5 × one (lifecycle)",
         "value": value, "met": None if value is None else value >= 1.5, "floor": None,
         "floor_met": None, "note": "see Scale-out: CPU left for the workers"}
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a few seconds, tiny sizes (tests)")
    ap.add_argument("--skip-setup", action="store_true", help="no npm ci / pip install")
    ap.add_argument("--reps", type=int)
    ap.add_argument(
        "--servers",
        help="comma-separated subset of ts,mcp129,floor,floor-sdk,ceiling,ours-memory,"
        "ours-h11,ours-sqlite,ours-redis,fastmcp,ours-ext,scaleout",
    )
    ap.add_argument("--out", type=Path, help="results directory")
    ap.add_argument(
        "--update-readme",
        action="store_true",
        help="write the tables into benchmarks/README.md's markers",
    )
    args = ap.parse_args(argv)
    plan = QUICK if args.quick else Plan()
    if args.reps:
        plan.reps = args.reps
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
        runnable = [s for s in specs if s.missing is None]
        for s in specs:
            if s.missing:
                print(f"skipping {s.name}: {s.missing}", file=sys.stderr)
        info = machine()
        result = asyncio.run(run_all(runnable, plan, tmp))
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
        "errors": result["errors"],
        "server_logs_tail": logs,
        "aggregate": agg,
        "ours_flags": list(OURS_FLAGS),
        "scaleout": scale,
    }
    report["targets"] = targets(agg, plan, {s.name for s in specs if s.face == EXT})
    report["targets"] += scale_targets(scale)
    json_path = out_dir / "peers-latest.json"
    json_path.write_text(json.dumps(report, indent=1, default=str))
    md = markdown(report)
    (out_dir / "peers-latest.md").write_text(md)
    pngs = plot(json_path, out_dir)
    if args.update_readme and not args.quick and out_dir == RESULTS:
        update_readme(md)
    print(md)
    print(
        f"wrote {json_path}, {out_dir / 'peers-latest.md'} {' '.join(pngs)} in {report['seconds']:.0f} s"
    )
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
