"""Our example server (``python -m mcp_tasks.examples.server``) as a real subprocess over
Streamable HTTP on a free 127.0.0.1 port, its task requests through one front door
(:mod:`testkit.doors`); stopped by PID, always.

Its limit flags come from ``EngineConfig`` field names (``engine_config=``), so the limit
and soak tests read like the engine's configuration.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from testkit.doors import door_args
from testkit.procs import (
    ChildProcess,
    free_port,
    on_free_ports,
    python_env,
    wait_listening,
)
from testkit.warm import Proc, start_python

SERVER_MODULE = "mcp_tasks.examples.server"
#: Seconds for a server to listen (imports on a loaded 2-core machine).
STARTUP_TIMEOUT = 60.0

#: EngineConfig field -> the example server's limit flag
LIMIT_FLAGS = {
    "max_active_per_requestor": "--max-active",
    "max_ttl_ms": "--max-ttl",
    "default_ttl_ms": "--default-ttl",
    "page_size": "--page-size",
}


def limit_flags(engine_config: dict[str, Any] | None) -> list[str]:
    """The example server's limit flags for these ``EngineConfig`` fields."""
    cfg = dict(engine_config or {})
    out: list[str] = []
    if "rate_limit_calls" in cfg or "rate_limit_window_s" in cfg:
        calls = cfg.pop("rate_limit_calls", 1000)
        window = cfg.pop("rate_limit_window_s", 10.0)
        out += ["--rate-limit", f"{calls}/{window}"]
    for key, value in cfg.items():
        out += [LIMIT_FLAGS[key], str(value)]
    return out


def server_args(*args: str, engine_config: dict[str, Any] | None = None) -> list[str]:
    """The example server's arguments, with limit flags for ``engine_config`` (EngineConfig
    fields). A test stops its servers with tasks still running: they stop at once
    (``--shutdown-grace 0``) unless the test gives a grace (a test of the graceful stop)."""
    flags = limit_flags(engine_config)
    quick = [] if "--shutdown-grace" in (*args, *flags) else ["--shutdown-grace", "0"]
    return [*args, *flags, *quick]


def server_command(*args: str, engine_config: dict[str, Any] | None = None) -> list[str]:
    """The example server's command line (:func:`server_args`)."""
    return [sys.executable, "-m", SERVER_MODULE, *server_args(*args, engine_config=engine_config)]


def rss_kb(pid: int) -> int:
    """Resident set size of a process, in KiB (Linux /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


class HttpServer(ChildProcess):
    """One example server subprocess serving Streamable HTTP on 127.0.0.1.

    ``front_door`` has no default: whoever starts one says which door its task requests
    take (the fixtures pass their ``front_door`` parameter). ``fd_limit``: the child's
    limit on open file descriptors (``RLIMIT_NOFILE``'s soft one), else this process's."""

    def __init__(
        self,
        *args: str,
        log_dir: Path,
        front_door: str,
        engine_config: dict[str, Any] | None = None,
        fd_limit: int | None = None,
    ) -> None:
        self.args = [*args, *door_args(front_door)]
        self.front_door = front_door
        self.engine_config = engine_config
        self.fd_limit = fd_limit
        self.log_dir = log_dir
        self.port = 0
        self.url = ""
        self.proc: Proc | None = None
        self.log_path = log_dir / "server.log"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, port: int | None = None) -> HttpServer:
        """Start it on ``port`` (default: a free one) and wait until it listens. A free port
        that another test process took in the meantime (the suite runs on several xdist
        workers) is given up for another one."""
        if port is not None:
            return self._start(port)
        self.port = free_port()
        return on_free_ports(lambda: self._start(self.port), self._move)

    def _move(self) -> None:
        self.port = free_port()

    def _start(self, port: int) -> HttpServer:
        self.port = port
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.log_path = self.log_dir / f"server-{self.port}.log"
        args = server_args(
            "--http", f"127.0.0.1:{self.port}", *self.args, engine_config=self.engine_config
        )
        with open(self.log_path, "ab") as log:
            self.proc = start_python(SERVER_MODULE, args, log, python_env(), self.fd_limit)
        wait_listening(self.proc, self.port, self.log_path, STARTUP_TIMEOUT, "server")
        return self

    def restart(self) -> HttpServer:
        """SIGKILL by PID, then a new process on the same port and arguments (a crashed
        server brought back; its clients see the port refuse connections meanwhile)."""
        port = self.port
        self.kill()
        return self.start(port)


class ServerPool:
    """Example servers started on first use, one per front door and arguments, shared by the
    tests of one scope and stopped at its end (:meth:`close`).

    It lets a fixture parametrized over more than doors (``http-endpoint``, ``http-sdk``,
    ``stdio``) share one module-wide server per door."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self._servers: dict[tuple[str, tuple[str, ...]], HttpServer] = {}

    def get(self, front_door: str, *args: str) -> HttpServer:
        key = (front_door, args)
        if key not in self._servers:
            server = HttpServer(*args, log_dir=self.log_dir, front_door=front_door)
            self._servers[key] = server.start()
        return self._servers[key]

    def close(self) -> None:
        servers, self._servers = list(self._servers.values()), {}
        for server in servers:
            server.stop()
