"""Several example-server processes behind one port: ``--workers N``.

The parent binds the listening socket and starts N children, each
``python -m PACKAGE.examples.server`` with the same arguments plus ``--worker-fd FD``:
every child serves the inherited socket with an engine of its own on the shared store,
and the kernel hands each new connection to one of them. The parent serves nothing.

- SIGTERM or SIGINT to the parent: it sends SIGTERM to every child (each stops like a
  server on Ctrl-C: its engine and its store close), waits up to ``GRACE_S`` seconds,
  kills what is left, and exits 0.
- A child that exits by itself: the parent stops the others and exits 1 (run it under a
  supervisor that restarts it).
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

__all__ = ["GRACE_S", "listen", "serve_workers"]

#: Seconds a child has to stop after SIGTERM before it is killed.
GRACE_S = 20.0
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


def serve_workers(
    module: str, argv: Sequence[str], host: str, port: int, workers: int, grace_s: float = GRACE_S
) -> int:
    """Run ``workers`` children of ``python -m module *argv`` on one socket until a signal
    (exit status 0) or until a child exits by itself (1, the others stopped)."""
    sock = listen(host, port)
    fd = sock.fileno()
    stopping: list[int] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopping.append(signum)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    procs: list[subprocess.Popen[bytes]] = []
    dead: subprocess.Popen[bytes] | None = None
    try:
        command = [sys.executable, "-m", module, *argv, "--worker-fd", str(fd)]
        while len(procs) < workers and not stopping:
            procs.append(
                subprocess.Popen(command, pass_fds=(fd,), preexec_fn=_die_with(os.getpid()))
            )
        while not stopping and dead is None:
            time.sleep(0.2)
            dead = next((p for p in procs if p.poll() is not None), None)
    finally:
        sock.close()  # the children hold their own copies
        _stop(procs, grace_s)
        for s, handler in previous.items():
            signal.signal(s, handler)
    if dead is None:
        return 0
    print(
        f"worker {dead.pid} exited with status {dead.returncode}: stopped the others",
        file=sys.stderr,
    )
    return 1
