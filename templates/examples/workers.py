"""Several example-server processes behind one port: ``--workers N``.

The parent binds the listening socket and starts N children, each
``python -m PACKAGE.examples.server`` with the same arguments plus ``--worker-fd FD``:
every child serves the inherited socket with an engine of its own on the shared store,
and the kernel hands each new connection to one of them. The parent serves nothing.

- SIGTERM or SIGINT to the parent: it sends SIGTERM to every child (each stops like a
  server on Ctrl-C: its engine and its store close), waits up to ``GRACE_S`` seconds,
  kills what is left, and exits 0.
- A child that exits by itself is replaced by a new one (the others keep serving; the
  tasks it was running become ``failed`` once its lease expires, reaped by another
  worker's sweep or by the new worker's start).
  One that exits within ``STARTUP_S`` seconds of its start could not start (a bad
  ``--tokens`` file, say): the parent stops the others and exits 1.
- On Linux every child gets SIGTERM when the parent dies, however it dies
  (``PR_SET_PDEATHSIG``): no orphan keeps serving the port.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from types import FrameType

__all__ = ["GRACE_S", "STARTUP_S", "listen", "serve_workers"]

#: Seconds a child has to stop after SIGTERM before it is killed.
GRACE_S = 20.0
#: A child that exits sooner than this after its start could not start: the set stops.
STARTUP_S = 5.0
#: ``prctl`` option: the signal a process gets when its parent dies (linux/prctl.h).
_PR_SET_PDEATHSIG = 1


def listen(host: str, port: int, backlog: int = 2048) -> socket.socket:
    """A listening TCP socket the children inherit (``SO_REUSEADDR``, as uvicorn binds)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.create_server((host, port), family=family, backlog=backlog)
    sock.set_inheritable(True)
    return sock


def _die_with(parent: int) -> Callable[[], None] | None:
    """In the child, before exec: SIGTERM when ``parent`` dies (Linux only)."""
    if not sys.platform.startswith("linux"):
        return None

    def arm() -> None:
        import ctypes

        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM))
        if os.getppid() != parent:  # the parent died before prctl: nobody would tell us
            os._exit(1)

    return arm


def _stop(procs: Sequence[subprocess.Popen[bytes]], grace_s: float) -> None:
    """SIGTERM to every running child, then SIGKILL to those still running after ``grace_s``."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for p in procs:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def _spawn(command: list[str], fd: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(command, pass_fds=(fd,), preexec_fn=_die_with(os.getpid()))


def serve_workers(
    module: str,
    argv: Sequence[str],
    host: str,
    port: int,
    workers: int,
    grace_s: float = GRACE_S,
    startup_s: float = STARTUP_S,
) -> int:
    """Keep ``workers`` children of ``python -m module *argv`` serving one socket until a
    signal (exit status 0), replacing those that die; one that dies within ``startup_s``
    of its start stops them all (1)."""
    sock = listen(host, port)
    fd = sock.fileno()
    command = [sys.executable, "-m", module, *argv, "--worker-fd", str(fd)]
    stopping: list[int] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopping.append(signum)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    started: dict[subprocess.Popen[bytes], float] = {}
    failure: str | None = None
    try:
        while failure is None and not stopping:
            for p in [p for p in started if p.poll() is not None]:
                age = time.monotonic() - started.pop(p)
                what = f"worker {p.pid} exited with status {p.returncode}"
                if age < startup_s:
                    failure = f"{what} {age:.1f}s after its start: stopping the others"
                    break
                print(f"{what}: starting another", file=sys.stderr, flush=True)
            while failure is None and not stopping and len(started) < workers:
                started[_spawn(command, fd)] = time.monotonic()
            time.sleep(0.2)
    finally:
        sock.close()  # the children hold their own copies
        _stop(list(started), grace_s)
        for s, handler in previous.items():
            signal.signal(s, handler)
    if failure is not None:
        print(failure, file=sys.stderr)
        return 1
    return 0
