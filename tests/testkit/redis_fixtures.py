"""A throwaway ``redis-server`` for tests (reusable by any test module).

Import the fixtures into a test module::

    from testkit.redis_fixtures import redis_server, redis_url  # noqa: F401

``redis_server`` (session scope) starts Debian's ``redis-server`` on 127.0.0.1 with a
free port, without persistence (``--save '' --appendonly no``), and stops it by PID
at teardown. ``fresh_redis_server`` is a private server per test (restart tests stop
and start it); ``RedisServer(dir, persist=True)`` keeps its data across a restart
(append-only file, fsync on every write). When ``redis-server`` is not installed the tests are skipped, except
when the ``CI`` environment variable is set: then they fail, saying so.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.procs import free_port, listens_on, running, stop_process
from testkit.wait import WaitTimeout, until

STARTUP_TIMEOUT_S = 20.0


def redis_server_binary() -> str:
    """The ``redis-server`` path, or fail (under CI) / skip the calling test."""
    path = shutil.which("redis-server")
    if path is None:
        msg = (
            "redis-server is not installed: the Redis task-store tests need Debian's "
            "`redis-server` package (apt-get install -y redis-server; .ci/run installs it)"
        )
        if os.environ.get("CI"):
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)
    return path


def _ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """One ``redis-server`` process; ``stop``/``start`` keep the same port."""

    def __init__(self, workdir: Path, port: int | None = None, *, persist: bool = False) -> None:
        self.binary = redis_server_binary()
        #: append-only with fsync on every write: a restart keeps every acknowledged write
        self.persist = persist
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    def start(self) -> None:
        assert self.proc is None, "already running"
        for _attempt in range(5):
            log = open(self.workdir / f"redis-{self.port}.log", "ab")
            self.proc = subprocess.Popen(
                [
                    self.binary,
                    "--port",
                    str(self.port),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    *(
                        ("--appendonly", "yes", "--appendfsync", "always")
                        if self.persist
                        else ("--appendonly", "no")
                    ),
                    "--dir",
                    str(self.workdir),
                    "--daemonize",
                    "no",
                    "--loglevel",
                    "warning",
                ],  # fmt: skip
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
            log.close()
            if self._answers(self.proc):
                return
            self.stop()
            self.port = free_port()
        raise RuntimeError(f"redis-server did not start (see logs in {self.workdir})")

    def _answers(self, proc: subprocess.Popen[bytes]) -> bool:
        """Wait until ``proc`` answers PING (True) or exits: the port was taken meanwhile,
        probably (False). A PONG from another process's Redis on that port is no answer of
        ``proc``'s (False)."""
        try:
            until(lambda: proc.poll() is not None or _ping(self.port), STARTUP_TIMEOUT_S)
        except WaitTimeout:
            return False
        return proc.poll() is None and listens_on(proc.pid, self.port) is not False

    def stop(self) -> None:
        """Stop by PID (SIGTERM, then SIGKILL after 10 s)."""
        proc, self.proc = self.proc, None
        stop_process(proc, grace=10)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A Redis shared by the whole session: isolate tests by key namespace (``redis_url``)."""
    with running(RedisServer(tmp_path_factory.mktemp("redis"))) as server:
        yield server


@pytest.fixture
def fresh_redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A Redis of this test's own, free to stop and restart."""
    with running(RedisServer(tmp_path / "redis")) as server:
        yield server


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    return redis_server.url


def unique_namespace() -> str:
    return "t-" + uuid.uuid4().hex[:12]
