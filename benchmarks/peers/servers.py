"""The servers of ``peers_bench.py``: what each one is (:class:`ServerSpec`, its command line
on a port), the list of them (:func:`server_specs`), and a started one (:class:`Running`:
its PID, port, CPU and RSS), with the throw-away redis-server of the ours-redis rows.

Imported by ``benchmarks/peers_bench.py``, which puts this folder and ``tests/`` (for
``testkit.fastmcp_peer``) on the import path.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import localhost
from localhost import HOST

from testkit import fastmcp_peer

PEERS = Path(__file__).resolve().parent
ROOT = PEERS.parents[1]
TS_DIR = PEERS / "ts"
VENV129 = PEERS / ".venv-mcp129"
PY129 = VENV129 / "bin" / "python"
#: The flags our example server runs with beyond ``--http`` and ``--store`` (reported).
OURS_FLAGS = ("--rate-limit", "1000000/1")
#: The TypeScript SDK as its users run it (its examples: express with ``express.json()``,
#: the parsed body handed to the transport; its default response mode, SSE): every target's
#: reference.
TS = "ts"
#: The same server with ``enableJsonResponse`` (reported beside it, never a reference).
TS_JSON = "ts-json"
#: The same server on ``node:http`` with the raw request handed to the transport, which
#: then reads and parses the body itself (the setup of earlier figures; never a reference).
TS_RAW = "ts-raw"
#: The same on ``node:http`` with the body read and parsed by the app (``JSON.parse``, no
#: express) and handed to the transport (never a reference).
TS_PARSED = "ts-parsed"
CORE, EXT = "2025-11-25", "2026-07-28"  # the face a server is measured on
FASTMCP = "fastmcp"
CEILING = "ceiling"
OURS_MEMORY = "ours-memory"  # the example server as shipped, memory store
OURS_H11 = "ours-h11"  # the example server on uvicorn's h11 + plain asyncio (--http-stack h11)
#: The suffix of a row that runs the same server from another checkout (``--before``).
BEFORE = "@before"


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
    #: its store's round trips are counted on a process of its own (``counted.py``), which
    #: writes them here
    counts: Path | None = None


def uvicorn_auto_stack() -> str:
    """What uvicorn's ``http="auto"`` and ``loop="auto"`` pick in this virtualenv (the
    servers run on ``sys.executable``): httptools and uvloop when they import."""
    from importlib.util import find_spec

    http = "httptools" if find_spec("httptools") else "h11"
    loop = "uvloop" if find_spec("uvloop") else "asyncio"
    return f"{http} + {loop}"


def redis_store_spec() -> tuple[str | None, str | None]:
    """(``--store`` prefix for Redis, why not) when the runtime ships a Redis store."""
    try:
        import mcp_tasks.runtime as rt
    except ImportError as exc:
        return None, str(exc)
    if not (Path(rt.__file__).parent / "redis").is_dir():
        return None, "no templates/runtime/stores/redis/ yet (no Redis store in this runtime)"
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


def on_shared_store(
    name: str,
    label: str,
    store: Callable[[int, Path], str],
    missing: str | None = None,
    needs_redis: bool = False,
) -> ServerSpec:
    """Our example server on a store that instances share (an SQLite file, a Redis
    database), ``store`` on (port, tmp dir): its 100,000-task list row is written through a
    second instance of that store."""
    return ServerSpec(
        name,
        label,
        lambda port, d: ours_argv(port, store(port, d)),
        store=store,
        shared_store=True,
        missing=missing,
        needs_redis=needs_redis,
    )


def _ts_command(port: int, *flags: str) -> list[str]:
    return ["node", "--expose-gc", str(TS_DIR / "server.mjs"), "--port", str(port), *flags]


def _ts_missing() -> str | None:
    installed = (TS_DIR / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir()
    return (
        None
        if installed and shutil.which("node")
        else "node_modules missing (run without --skip-setup)"
    )


def server_specs(tmp: Path, quick: bool) -> list[ServerSpec]:
    py = sys.executable
    specs = [
        ServerSpec(
            TS,
            "TypeScript SDK 1.32.2 as its examples run it (express.json(), parsed body;"
            " SSE responses; InMemoryTaskStore)",
            lambda port, _: _ts_command(port),
            heap_hook=True,
            missing=_ts_missing(),
        ),
        ServerSpec(
            TS_JSON,
            "TypeScript SDK 1.32.2, the same with enableJsonResponse",
            lambda port, _: _ts_command(port, "--json-response"),
            heap_hook=True,
            missing=_ts_missing(),
        ),
        ServerSpec(
            TS_RAW,
            "TypeScript SDK 1.32.2, raw request (node:http; the SDK parses the body; SSE)",
            lambda port, _: _ts_command(port, "--raw-request"),
            missing=_ts_missing(),
            workloads=("lifecycle", "wakeup", "poll"),
        ),
        ServerSpec(
            TS_PARSED,
            "TypeScript SDK 1.32.2, node:http, the body parsed by the app (JSON.parse) and"
            " handed over; SSE",
            lambda port, _: _ts_command(port, "--parsed-body"),
            missing=_ts_missing(),
            workloads=("lifecycle", "wakeup", "poll"),
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
        on_shared_store("ours-sqlite", "ours, SqliteTaskStore", sqlite_store),
    ]
    specs += ext_specs()
    _redis_prefix, why = redis_store_spec()
    specs.append(on_shared_store("ours-redis", "ours, RedisTaskStore", redis_store, why, True))
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


#: Our rows whose store's round trips are counted (``counted.py``, ``workloads.w_counts``).
STORE_ROWS = ("ours-sqlite", "ours-redis")
#: The ``--before`` rows of ours: the shipped default on both faces, and the stores.
BEFORE_ROWS = (OURS_MEMORY, "ours-ext", *STORE_ROWS)
COUNTED = PEERS / "counted.py"


def counted(spec: ServerSpec, tmp: Path) -> ServerSpec:
    """``spec`` (ours) on a process that counts its store's round trips (``counted.py``)."""
    path = tmp / f"{spec.name.replace('@', '-')}-counts.json"
    argv = spec.argv
    return replace(
        spec,
        argv=lambda port, d: [sys.executable, str(COUNTED), str(path), *argv(port, d)[1:]],
        counts=path,
    )


def before_specs(specs: list[ServerSpec], checkout: Path) -> list[ServerSpec]:
    """The rows of ours among ``specs`` that ``BEFORE_ROWS`` names again, served from
    ``checkout``'s ``generated/`` (an earlier commit's worktree): the same command line, the
    package found first on ``PYTHONPATH`` (a Redis row in a namespace of its own). Lifecycle
    and poll only, each measured in pairs of windows with the row it repeats
    (``paired.py``), in the same run; the store rows' round trips are counted too."""
    generated = checkout.resolve() / "generated"
    if not (generated / "mcp_tasks" / "examples" / "server.py").is_file():
        raise ValueError(f"--before {checkout}: no generated/mcp_tasks/examples/server.py there")
    path = os.pathsep.join(p for p in (str(generated), os.environ.get("PYTHONPATH")) if p)
    out = []
    for spec in specs:
        if spec.name not in BEFORE_ROWS or spec.missing:
            continue
        workloads = ("ext_lifecycle", "ext_poll") if spec.face == EXT else ("lifecycle", "poll")
        before = replace(
            spec,
            name=spec.name + BEFORE,
            label=f"{spec.label}, before ({checkout})",
            env={**spec.env, "PYTHONPATH": path},
            workloads=workloads,
        )
        if spec.needs_redis:  # both sides up at once on one Redis: apart
            before = _namespaced(before, "mcp-tasks-before")
        out.append(before)
    return out


def _namespaced(spec: ServerSpec, namespace: str) -> ServerSpec:
    """``spec`` (ours on Redis) with its tasks in ``namespace``."""
    store = spec.store
    assert store is not None

    def url(port: int, d: Path) -> str:
        return f"{store(port, d)}?namespace={namespace}"

    return replace(spec, store=url, argv=lambda port, d: ours_argv(port, url(port, d)))


class RedisServer:
    """One throw-away redis-server for the ours-redis rows, flushed before each server start."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0

    async def start(self) -> None:
        self.port = localhost.free_port()
        os.environ["BENCH_REDIS_PORT"] = str(self.port)
        self.proc = subprocess.Popen(
            localhost.redis_argv(self.port),
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
        line = await localhost.redis_command(self.port, "FLUSHALL")
        if not line.startswith(b"+OK"):
            raise OSError(f"FLUSHALL: {line!r}")

    def stop(self) -> None:
        localhost.stop(self.proc)


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
            self.port = localhost.free_port()
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
        return sum(localhost.cpu_s(pid) for pid in self.pids())

    def rss_bytes(self) -> int:
        return sum(localhost.rss_bytes(pid) for pid in self.pids())

    def stop(self) -> None:
        localhost.stop(self.proc)
