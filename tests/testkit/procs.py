"""Subprocess servers in tests: a free port, the environment of a Python child, wait until one
listens on 127.0.0.1, stop one by its PID, and run servers for the length of a ``with`` block."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Protocol, TypeVar

from testkit.wait import WaitTimeout, until
from testkit.warm import Proc


@contextmanager
def refusing_port() -> Iterator[int]:
    """A 127.0.0.1 port that refuses connections for the length of the block: bound here and
    never listened on, so no other test process can start a server on it meanwhile (a
    ``free_port()`` only says nothing listens *now*)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        yield int(s.getsockname()[1])


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (the OS picks it)."""
    with refusing_port() as port:
        return port


#: ``tests/``: on a Python child's ``PYTHONPATH``, so it can run ``python -m testkit.NAME``
TESTS_DIR = Path(__file__).resolve().parents[1]


def python_env() -> dict[str, str]:
    """This process's environment for a Python child: unbuffered output (for its log), and
    ``tests/`` first on ``PYTHONPATH`` (pytest's ``pythonpath`` setting reaches only this
    process), so the child can import ``testkit``."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    paths = [str(TESTS_DIR), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return env


class PortTaken(RuntimeError):
    """Another process listens on the port a server was started on (a free port another
    xdist worker took between ``free_port()`` and the bind): start it again on another."""


def port_conflict(exc: RuntimeError) -> bool:
    """Whether a server failed to start because its port was taken (by a stranger that
    listens there, or as its own bind said): worth another try on another free port."""
    return isinstance(exc, PortTaken) or "address already in use" in str(exc).lower()


T = TypeVar("T")

#: how many times a server is started on fresh ports before its start fails
PORT_TRIES = 4


def on_free_ports(start: Callable[[], T], move: Callable[[], None]) -> T:
    """``start()``, and when its port was taken meanwhile (:func:`port_conflict`), ``move()``
    to other free ports and start again, at most :data:`PORT_TRIES` times in all."""
    for _ in range(PORT_TRIES - 1):
        try:
            return start()
        except RuntimeError as exc:
            if not port_conflict(exc):
                raise
        move()
    return start()


def _listening_inodes(port: int) -> set[str] | None:
    """The inodes of the sockets listening on TCP ``port`` (IPv4 and IPv6), from
    ``/proc/net``; None where that cannot be read (not Linux)."""
    inodes: set[str] = set()
    read = False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        read = True
        for row in rows:
            cols = row.split()
            # local address "HEXADDR:HEXPORT", state 0A is LISTEN, the inode in column 10
            if len(cols) > 9 and cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(cols[9])
    return inodes if read else None


def _family(pid: int) -> set[int]:
    """``pid`` and every process descended from it (a server may listen in a child)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            # the command name, in parentheses, may hold spaces: the parent follows it
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    family, todo = set(), [pid]
    while todo:
        p = todo.pop()
        family.add(p)
        todo.extend(children.get(p, ()))
    return family


def _holds_one_of(pid: int, inodes: set[str]) -> bool:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:[") and link[8:-1] in inodes:
            return True
    return False


def listens_on(pid: int, port: int) -> bool | None:
    """Whether the process ``pid`` (or one of its descendants) holds the socket listening on
    ``port``; None when nothing listens there or ``/proc`` cannot say."""
    inodes = _listening_inodes(port)
    if not inodes:
        return None
    return any(_holds_one_of(p, inodes) for p in _family(pid))


def wait_listening(
    proc: Proc, port: int, log_path: Path, timeout: float, what: str = "server"
) -> None:
    """Return once ``proc`` accepts connections on ``port``; stop it and raise with its log if it
    exits first or does not listen within ``timeout`` seconds, and :class:`PortTaken` when
    the process listening there is another one (a connection alone would not tell: the
    test would talk to a stranger while its own server failed to bind)."""

    def listening() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited early:\n{log_path.read_text(errors='replace')}")
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            pass
        if listens_on(proc.pid, port) is False:
            stop_process(proc)
            raise PortTaken(
                f"{what}: address already in use: another process listens on port {port}"
            )
        return True

    try:
        until(listening, timeout, interval=0.1, ignoring=(OSError,), what=f"{what} listens")
    except WaitTimeout:
        stop_process(proc)
        raise RuntimeError(
            f"{what} did not start:\n{log_path.read_text(errors='replace')}"
        ) from None


#: how long a stopped process gets to exit before it is killed: our servers exit within a
#: second or two of SIGTERM; a teardown never waits longer than this for one that hangs
STOP_GRACE_S = 5.0


def stop_process(proc: Proc | None, grace: float = STOP_GRACE_S) -> None:
    """SIGTERM by PID, then SIGKILL if it has not exited within ``grace`` seconds."""
    if proc is None or proc.poll() is not None:
        return
    os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=15)


def kill_process(proc: Proc | None) -> None:
    """SIGKILL by PID: no shutdown code runs (a crash); a no-op when it is not running."""
    if proc is not None and proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=15)


class ChildProcess:
    """A process a test started, with its log file: ``stop`` (SIGTERM, then SIGKILL),
    ``kill`` (SIGKILL: a crash), both by PID and no-ops when it is not running."""

    proc: Proc | None = None
    log_path: Path

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        stop_process(proc)

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs (its running tasks stay non-terminal)."""
        proc, self.proc = self.proc, None
        kill_process(proc)


class Server(Protocol):
    """A test server process: ``start`` it, ``stop`` it (by PID; a no-op when not running)."""

    def start(self) -> Any: ...

    def stop(self) -> None: ...


S = TypeVar("S", bound=Server)


@contextmanager
def running(server: S) -> Iterator[S]:
    """``server``, started; stopped on exit whatever happens (also when it failed to start)."""
    try:
        server.start()
        yield server
    finally:
        server.stop()


@contextmanager
def started_servers(new: Callable[..., S]) -> Iterator[Callable[..., S]]:
    """``make(*args, **kwargs)``: ``new(*args, **kwargs)``, started; every server it made is
    stopped on exit."""
    with ExitStack() as stack:

        def make(*args: Any, **kwargs: Any) -> S:
            return stack.enter_context(running(new(*args, **kwargs)))

        yield make


def quick_bench(script: Path, folder: Path, timeout: float) -> tuple[list[Any], str]:
    """Run a benchmark script's ``--quick`` mode (with a Redis of its own, skipped or failed
    under CI without redis-server): its JSON rows and its printed table."""
    from testkit.redis_fixtures import redis_server_binary

    redis_server_binary()
    rows_path = folder / "rows.json"
    out = subprocess.run(
        [sys.executable, str(script), "--quick", "--json", str(rows_path)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    rows: list[Any] = json.loads(rows_path.read_text())
    return rows, out.stdout


def before_checkout(root: Path, folder: Path, server_py: str | None = None) -> Path:
    """A checkout for a benchmark's ``--before``: ``root``'s ``generated/`` copied into
    ``folder/before`` (its example server replaced by ``server_py`` when given)."""
    import shutil

    checkout = folder / "before"
    shutil.copytree(
        root / "generated", checkout / "generated", ignore=shutil.ignore_patterns("__pycache__")
    )
    if server_py is not None:
        (checkout / "generated" / "mcp_tasks" / "examples" / "server.py").write_text(server_py)
    return checkout
