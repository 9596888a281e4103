"""The example server and ``mcptask`` started warm: forked from one process per test worker
that has already imported them, instead of a new interpreter importing the ``mcp`` SDK
again (about 0.8 s of CPU a start; the suite starts hundreds, on two cores).

The child is what ``python -m MODULE ARGS`` runs: the module's ``main`` from the top
(``runpy``, ``__main__``), its own PID, its output into the log file or pipes, its exit
code, its signals, with the environment and working directory asked for. What differs is
only what the imports did before the fork, and a warm start is taken only when they did
nothing a start depends on: the forking process runs in that environment (but for
:data:`VOLATILE`, so no import read another value) and working directory, with one thread
(so the fork copies no lock held by another); the child seeds the random generator again.
Anything else starts cold, a new interpreter (:func:`start_python`, :func:`run_python`).

The forking process (``python -m testkit.warm``) is the child's parent: it reaps it and says
how it ended when asked (:class:`WarmProcess`, the part of ``subprocess.Popen`` the suite
uses: ``pid``, ``poll``, ``wait``, ``returncode``). It exits when the test worker that
started it closes its end of the socket (the worker's exit).
"""

from __future__ import annotations

import atexit
import io
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any, Protocol

#: The modules a warm start may run, imported by the forking process before any fork: the
#: example server and the ``mcptask`` CLI.
WARM_MODULES = ("mcp_tasks.examples.server", "mcp_tasks.cli")
#: Set to ``0`` to start every one of them cold (a new interpreter).
ENV_WARM = "MCPTASK_TEST_WARM"


class Proc(Protocol):
    """What the suite uses of a started process (``subprocess.Popen`` or :class:`WarmProcess`)."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


class WarmProcess:
    """A process the forking process started: polled and waited for through it."""

    def __init__(self, starter: _Starter, pid: int, args: list[str]) -> None:
        self._starter = starter
        self.pid = pid
        self.args = args
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._starter.status(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            time.sleep(0.02)
        return code


class _Starter:
    """This test worker's end of the forking process (started on first use)."""

    def __init__(self, env: dict[str, str]) -> None:
        self._lock = threading.Lock()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._sock = ours
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "testkit.warm", str(theirs.fileno())],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=[theirs.fileno()],
        )
        theirs.close()
        ready = self._ask({"op": "ready"})
        if not ready.get("ready"):
            self.close()
            raise RuntimeError(f"warm starts unavailable: {ready.get('why')}")

    def _ask(self, request: dict[str, Any], fds: list[int] | None = None) -> dict[str, Any]:
        with self._lock:
            socket.send_fds(self._sock, [json.dumps(request).encode()], fds or [])
            reply = self._sock.recv(65536)
        if not reply:
            raise RuntimeError("the warm-start process is gone")
        answer: dict[str, Any] = json.loads(reply)
        return answer

    def start(
        self, argv: list[str], env: dict[str, str], stdio: list[int], fd_limit: int | None = None
    ) -> WarmProcess:
        """Fork ``python -m`` ``argv`` with the environment ``env``; ``stdio``: its descriptors
        0, 1 and 2 (one alone: stdout and stderr, stdin on ``/dev/null``)."""
        request = {"op": "start", "argv": argv, "env": env, "fd_limit": fd_limit}
        reply = self._ask(request, stdio)
        if "error" in reply:
            raise OSError(f"{argv}: {reply['error']}")
        return WarmProcess(self, int(reply["pid"]), argv)

    def status(self, pid: int) -> int | None:
        code = self._ask({"op": "status", "pid": pid})["code"]
        return None if code is None else int(code)

    def close(self) -> None:
        self._sock.close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


#: One forking process per environment and working directory a start asked for (a test
#: that changes ``os.environ`` gets its own), up to :data:`MAX_STARTERS`, then cold starts.
_starters: dict[tuple[frozenset[tuple[str, str]], str], _Starter | None] = {}
MAX_STARTERS = 4
#: Variables that change from one test to the next and that no import reads: not part of a
#: forking process's environment (the child gets them as asked)
VOLATILE = frozenset({"PYTEST_CURRENT_TEST"})


def _warm_starter(env: dict[str, str]) -> _Starter | None:
    """The forking process for ``env`` here, or ``None`` where a start must be cold."""
    if os.environ.get(ENV_WARM) == "0":
        return None
    key = (frozenset((k, v) for k, v in env.items() if k not in VOLATILE), os.getcwd())
    if key not in _starters:
        if len(_starters) >= MAX_STARTERS:
            return None
        try:
            starter = _Starter(env)
        except (OSError, RuntimeError) as exc:
            print(f"testkit.warm: cold starts in this environment ({exc})", file=sys.stderr)
            _starters[key] = None
            return None
        atexit.register(starter.close)
        _starters[key] = starter
    return _starters[key]


def _command(
    module: str, args: list[str], env: dict[str, str]
) -> tuple[list[str], _Starter | None]:
    """``python -m module args...`` and the forking process to run it (``None``: cold)."""
    starter = _warm_starter(env) if module in WARM_MODULES else None
    return [sys.executable, "-m", module, *args], starter


def start_python(
    module: str, args: list[str], out: IO[bytes], env: dict[str, str], fd_limit: int | None = None
) -> Proc:
    """``python -m module args...`` with stdout and stderr into ``out``: forked warm when
    ``module`` is one the forking process imported and ``env`` is the environment it runs
    with (``fd_limit``: the child's soft limit on open descriptors), else a new process."""
    argv, starter = _command(module, args, env)
    if starter is not None:
        return starter.start(argv, env, [out.fileno()], fd_limit)
    return subprocess.Popen(
        argv, stdout=out, stderr=subprocess.STDOUT, env=env, preexec_fn=fd_limited(fd_limit)
    )


def run_python(
    module: str, args: list[str], *, env: dict[str, str], timeout: float, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``subprocess.run([python, "-m", module, *args], capture_output=True, text=True)``, its
    stdin ``input`` (else empty), forked warm when it can be (see :func:`start_python`)."""
    argv, starter = _command(module, args, env)
    if starter is None:
        return subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, env=env, input=input or ""
        )
    pipes = [os.pipe() for _ in range(3)]  # stdin, stdout, stderr: (read end, write end)
    theirs = [pipes[0][0], pipes[1][1], pipes[2][1]]
    try:
        proc = starter.start(argv, env, theirs)
    except BaseException:
        for fd in (pipes[0][1], pipes[1][0], pipes[2][0]):
            os.close(fd)
        raise
    finally:
        for fd in theirs:
            os.close(fd)
    captured: dict[int, bytes] = {}

    def drain(fd: int) -> None:  # owns ``fd``: a timeout leaves it to read to the end
        with open(fd, "rb") as pipe:
            captured[fd] = pipe.read()

    readers = [threading.Thread(target=drain, args=(pipes[i][0],), daemon=True) for i in (1, 2)]
    for reader in readers:
        reader.start()
    with open(pipes[0][1], "wb", buffering=0) as stdin:
        try:
            stdin.write((input or "").encode())
        except BrokenPipeError:  # it exited without reading: as subprocess.run takes it
            pass
    deadline = time.monotonic() + timeout
    try:
        for reader in readers:
            reader.join(max(0.0, deadline - time.monotonic()))
        code = proc.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(15)
        raise subprocess.TimeoutExpired(argv, timeout) from None
    if any(reader.is_alive() for reader in readers):  # a child of its holds the pipes
        raise subprocess.TimeoutExpired(argv, timeout)
    text = [io.TextIOWrapper(io.BytesIO(captured[pipes[i][0]])).read() for i in (1, 2)]
    return subprocess.CompletedProcess(argv, code, text[0], text[1])


def fd_limited(limit: int | None) -> Callable[[], None] | None:
    """A ``preexec_fn`` that sets a child's (soft) descriptor limit (``None``: none to set)."""
    if limit is None:
        return None

    def set_limit() -> None:
        import resource

        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))

    return set_limit


# --- the forking process (python -m testkit.warm FD) -------------------------------------


def _serve(sock: socket.socket) -> tuple[dict[str, Any], list[int]] | None:
    """Answer the worker until it goes; in a forked child, return its request and stdio."""
    import importlib

    why = ""
    try:
        for name in WARM_MODULES:
            importlib.import_module(name)
            # run as ``__main__`` in the child, as ``-m`` runs it: what the module imports
            # stays imported, the module itself is executed afresh
            del sys.modules[name]
            package, _, leaf = name.rpartition(".")
            delattr(sys.modules[package], leaf)
    except Exception as exc:  # said to the worker, which then starts cold (the error in its log)
        why = f"importing {name} failed: {exc!r}"
    if not why and threading.active_count() != 1:
        why = f"{threading.active_count()} threads after the imports: a fork is not safe"
    ended: dict[int, int] = {}
    while True:
        data, fds, _flags, _addr = socket.recv_fds(sock, 1 << 20, 4)
        if not data:
            return None
        request = json.loads(data)
        reply: dict[str, Any]
        if request["op"] == "ready":
            reply = {"ready": not why, "why": why}
        elif request["op"] == "status":
            pid = request["pid"]
            if pid not in ended:
                try:
                    done, status = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:  # never ours: say it ended
                    done, status = pid, 255 << 8
                if done:
                    ended[pid] = os.waitstatus_to_exitcode(status)
            reply = {"code": ended.get(pid)}
        else:
            try:
                pid = os.fork()
            except OSError as exc:  # said to the worker, which raises it
                pid, reply = -1, {"error": f"fork: {exc}"}
            if pid == 0:
                sock.close()
                return request, fds
            for fd in fds:
                os.close(fd)
            if pid > 0:
                reply = {"pid": pid}
        sock.send(json.dumps(reply).encode())


def _run_child(request: dict[str, Any], stdio: list[int]) -> None:
    """Become ``python -m MODULE ARGS`` on the descriptors ``stdio`` (0, 1, 2; one alone:
    stdout and stderr, stdin staying on ``/dev/null``)."""
    import random
    import runpy

    fds = [-1, stdio[0], stdio[0]] if len(stdio) == 1 else stdio
    for target, fd in enumerate(fds):
        if fd >= 0:
            os.dup2(fd, target)
    for fd in set(stdio):
        os.close(fd)
    if request["fd_limit"] is not None:
        set_limit = fd_limited(request["fd_limit"])
        assert set_limit is not None
        set_limit()
    os.environ.clear()
    os.environ.update(request["env"])
    random.seed()  # the fork copied the forking process's generator
    argv = request["argv"]
    sys.argv = [argv[2], *argv[3:]]
    runpy.run_module(argv[2], run_name="__main__", alter_sys=True)


def main() -> None:
    sock = socket.socket(fileno=int(sys.argv[1]))
    child = _serve(sock)
    if child is None:
        return
    _run_child(*child)


if __name__ == "__main__":
    main()
