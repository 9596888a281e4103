"""Several example-server processes behind one port: ``--workers N``.

The parent binds the listening socket and starts N children, each
``python -m PACKAGE.examples.server`` with the same arguments plus ``--worker-fd FD``:
every child serves the inherited socket with an engine of its own on the shared store,
and the kernel hands each new connection to one of them. The parent serves nothing.

- SIGTERM or SIGINT to the parent: it sends SIGTERM to every child (each stops like a
  server on Ctrl-C: its engine and its store close), waits up to ``GRACE_S`` seconds,
  kills what is left, and exits 0.
- A child that exits by itself is replaced by a new one; the others keep serving (the
  tasks it was running become ``failed`` once its lease expires, reaped by another
  worker's sweep or by the new worker's start). One that had run ``STARTUP_S`` seconds is
  replaced at once. One that exits sooner (it could not start, or was killed young) is
  replaced after a back-off, ``BACKOFF_S`` doubling with each consecutive early exit of
  its slot up to ``BACKOFF_MAX_S``, and back to ``BACKOFF_S`` once a worker of the slot
  has run ``STARTUP_S`` seconds. A healthy worker is never stopped for another's exits.
- The parent gives up only when every slot has had ``MAX_EARLY_EXITS`` early exits in a
  row (a configuration no worker can start with: an unreachable store, say; mistakes in
  the flags and the ``--tokens`` file are refused by the parent before any worker starts,
  exit 2): it stops the workers and exits 1, saying so in one line on stderr.
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
from dataclasses import dataclass
from types import FrameType

__all__ = [
    "BACKOFF_MAX_S",
    "BACKOFF_S",
    "GRACE_S",
    "MAX_EARLY_EXITS",
    "STARTUP_S",
    "listen",
    "serve_workers",
]

#: Seconds a child has to stop after SIGTERM before it is killed.
GRACE_S = 20.0
#: A child that exits sooner than this after its start exited early: replaced after a back-off.
STARTUP_S = 5.0
#: Seconds before the first replacement of a child that exited early; doubled each time.
BACKOFF_S = 0.5
#: The longest back-off between two starts of one slot's worker.
BACKOFF_MAX_S = 30.0
#: Early exits in a row of every slot after which the parent stops (exit 1).
MAX_EARLY_EXITS = 5
#: Seconds between two looks at the children (and the longest a due start waits).
_TICK_S = 0.2
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


@dataclass
class _Slot:
    """One of the N workers: its process (``None`` between two), when that started, its
    early exits in a row, and when the next may start."""

    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    early_exits: int = 0
    next_start: float = 0.0


def serve_workers(
    module: str,
    argv: Sequence[str],
    host: str,
    port: int,
    workers: int,
    grace_s: float = GRACE_S,
    startup_s: float = STARTUP_S,
    backoff_s: float = BACKOFF_S,
    backoff_max_s: float = BACKOFF_MAX_S,
    max_early_exits: int = MAX_EARLY_EXITS,
) -> int:
    """Keep ``workers`` children of ``python -m module *argv`` serving one socket until a
    signal (exit status 0), replacing those that exit (see the module); 1 once every slot's
    worker exited within ``startup_s`` of its start ``max_early_exits`` times in a row."""
    sock = listen(host, port)
    fd = sock.fileno()
    command = [sys.executable, "-m", module, *argv, "--worker-fd", str(fd)]
    stopping: list[int] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopping.append(signum)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    slots = [_Slot() for _ in range(workers)]
    failure: str | None = None
    try:
        while failure is None and not stopping:
            now = time.monotonic()
            for slot in slots:
                p = slot.proc
                if p is None:
                    continue
                age = now - slot.started
                if p.poll() is None:
                    if age >= startup_s:
                        slot.early_exits = 0  # it started: the next exit is not a failed start
                    continue
                slot.proc = None
                what = f"worker {p.pid} exited with status {p.returncode}"
                if age >= startup_s:
                    slot.early_exits, slot.next_start = 0, now
                    print(f"{what}: starting another", file=sys.stderr, flush=True)
                    continue
                slot.early_exits += 1
                if all(s.early_exits >= max_early_exits for s in slots):
                    failure = (
                        f"giving up: every worker exited within {startup_s:g}s of its start"
                        f" {max_early_exits} times in a row (the last: {what}"
                        f" {age:.1f}s after its start)"
                    )
                    break
                delay = min(backoff_max_s, backoff_s * 2 ** (slot.early_exits - 1))
                slot.next_start = now + delay
                print(
                    f"{what} {age:.1f}s after its start: starting another in {delay:g}s",
                    file=sys.stderr,
                    flush=True,
                )
            now = time.monotonic()
            for slot in slots if failure is None and not stopping else ():
                if slot.proc is None and now >= slot.next_start:
                    slot.proc, slot.started = _spawn(command, fd), time.monotonic()
            time.sleep(_TICK_S)
    finally:
        sock.close()  # the children hold their own copies
        _stop([s.proc for s in slots if s.proc is not None], grace_s)
        for s, handler in previous.items():
            signal.signal(s, handler)
    if failure is not None:
        print(failure, file=sys.stderr, flush=True)
        return 1
    return 0
