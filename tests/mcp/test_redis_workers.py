"""``--workers 2``: two example-server processes behind one port, sharing one Redis.

The kernel picks the worker of each connection, so the tests cannot steer a request to a
worker: they spread requests over many connections (several SDK sessions, each with its
own HTTP client; a raw client that closes the connection after each request) and check
that every answer is right whichever worker gave it. A task created through one
connection is read, waited on (``tasks/result`` blocks until the task ends, woken through
Redis when the other worker finishes it) and cancelled through others. A worker killed
mid-task is replaced, and the tasks it ran fail once its lease expires (reaped by the
other worker's sweep) while the others' tasks run on. Stopping: SIGTERM to the parent
stops every worker (each closes its store); a worker that cannot start stops the set; a
parent that dies takes its workers with it (Linux).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
import redis
from mcp.shared.exceptions import MCPError

from mcp_tasks.examples.server import main
from mcp_tasks.examples.workers import STARTUP_S
from testkit.doors import ENDPOINT, pinned
from testkit.ext_wire import ExtClient
from testkit.mcp_e2e import HttpServer, cancel_while_result_held, http_session, write_tokens
from testkit.procs import free_port, python_env
from testkit.redis_fixtures import RedisServer, redis_server, unique_namespace  # noqa: F401
from testkit.wait import until

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.door_agnostic]  # server worker processes: the door is not what is tested (testkit.doors)

WORKERS = 2
#: Seconds past ``STARTUP_S`` a worker runs before the test kills it (see its comment).
STARTUP_MARGIN_S = 3.0


@dataclass
class Workers:
    """The ``--workers`` server, its Redis namespace and a client of that Redis."""

    srv: HttpServer
    ns: str
    redis: redis.Redis

    def instances(self) -> list[str]:
        """The instance IDs heartbeating in the namespace (``host:pid:random``)."""
        return [str(m) for m in self.redis.zrange(f"{self.ns}:instances", 0, -1)]

    def owned(self, instance: str) -> set[str]:
        """The task IDs an instance runs (its lease set)."""
        members = self.redis.smembers(f"{self.ns}:owned:{instance}")
        return {str(m).split(":", 1)[1] for m in members}

    def take_proc(self) -> Any:
        """The parent process, which the test now stops itself."""
        proc, self.srv.proc = self.srv.proc, None
        assert proc is not None
        return proc


def _children(pid: int) -> list[int]:
    """The PIDs whose parent is ``pid`` (from /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if ppid == pid:
                out.append(int(entry))
    return out


def _age_s(pid: int) -> float:
    """Seconds since the kernel started ``pid`` (``/proc``: field 22 of its ``stat``, in
    clock ticks after boot, against ``/proc/uptime``)."""
    with open(f"/proc/{pid}/stat") as fh:
        start_ticks = int(fh.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as fh:
        uptime_s = float(fh.read().split()[0])
    return uptime_s - start_ticks / os.sysconf("SC_CLK_TCK")


def _exited(pid: int) -> bool:
    """Gone, or a zombie nobody has reaped yet (it runs nothing)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


@pytest.fixture
def workers(
    redis_example_server: Callable[..., HttpServer],
    redis_server: RedisServer,  # noqa: F811
) -> Workers:
    """The example server with ``--workers 2`` on a Redis namespace of its own (lease 2 s),
    once both workers' stores heartbeat there."""
    ns = unique_namespace()
    srv = redis_example_server(ns, "--workers", str(WORKERS), "--stateless")
    w = Workers(srv, ns, redis.Redis(port=redis_server.port, decode_responses=True))
    until(lambda: len(w.instances()) == WORKERS, what="both workers' stores heartbeat")
    return w


def _text(result: dict[str, Any]) -> str:
    return str(result["content"][0]["text"])


@pytest.mark.parametrize(
    ("extra", "missing"),
    [
        (["--store", "memory"], "--stateless"),
        (["--stateless", "--tokens", "t.json"], "--store redis://"),
        (["--stateless", "--tokens", "t.json", "--store", "sqlite:x.db"], "per process"),
        (["--stateless", "--store", "redis://127.0.0.1:1/0"], "--tokens FILE"),
        (["--tokens", "t.json", "--store", "redis://127.0.0.1:1/0"], "--stateless"),
    ],
)
def test_more_workers_need_stateless_tokens_and_redis(
    extra: list[str], missing: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--http", "127.0.0.1:1", "--workers", "2", *extra])
    assert exited.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--workers 2 needs" in last and missing in last, last


def test_workers_are_for_http_only(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--stdio", "--workers", "2"])
    assert exited.value.code == 2
    assert "--workers applies to --http only" in capsys.readouterr().err


async def test_create_through_one_connection_fetch_through_others(workers: Workers) -> None:
    srv = workers.srv
    async with (
        http_session(srv.url, token="tok-alice") as s0,
        http_session(srv.url, token="tok-alice") as s1,
        http_session(srv.url, token="tok-alice") as s2,
        http_session(srv.url, token="tok-alice") as s3,
        http_session(srv.url, token="tok-bob") as bob,
    ):
        sessions = [s0, s1, s2, s3]
        ids: list[str] = []
        for i in range(8):
            created = await sessions[i % 4].tasks.call_tool_as_task(
                "slow_compute", {"seconds": 0.3, "label": f"n{i}"}
            )
            ids.append(created.task.taskId)
        texts: dict[int, str] = {}

        async def fetch(i: int) -> None:
            await sessions[(i + 2) % 4].tasks.get(ids[i])
            texts[i] = _text(await sessions[(i + 1) % 4].tasks.result(ids[i]))

        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                for i in range(8):
                    tg.start_soon(fetch, i)
        assert texts == {i: f"done after 0.3s (n{i})" for i in range(8)}

        for s in sessions:  # every connection lists them all, whichever worker answers
            assert {t.taskId for t in await s.tasks.list_all()} == set(ids)
        with pytest.raises(MCPError) as err:  # another requestor sees nothing (R-SEC-1)
            await bob.tasks.get(ids[0])
        assert err.value.code == -32602

        # a tasks/result held on one connection answers the cancel sent through another
        await cancel_while_result_held(s0, s1, s2)


ALICE_NEW_CONNECTIONS = {"Authorization": "Bearer tok-alice", "Connection": "close"}


def test_extension_face_on_a_new_connection_per_request(workers: Workers) -> None:
    with ExtClient(workers.srv.url, headers=ALICE_NEW_CONNECTIONS, timeout=60) as ext:
        call = {"name": "slow_compute", "arguments": {"seconds": 0.2, "label": "x"}}
        ids = [ext.result("tools/call", call)["taskId"] for _ in range(6)]
        for tid in ids:
            done = ext.wait(tid, timeout=60)
            assert done["status"] == "completed"
            assert _text(done["result"]) == "done after 0.2s (x)"
        slow = ext.result("tools/call", {"name": "slow_compute", "arguments": {"seconds": 120}})
        ext.result("tasks/cancel", {"taskId": slow["taskId"]})
        assert ext.wait(slow["taskId"], timeout=60)["status"] == "cancelled"


def test_a_killed_worker_is_replaced_its_tasks_fail_after_its_lease(workers: Workers) -> None:
    proc = workers.srv.proc
    assert proc is not None
    victim, *_ = _children(proc.pid)
    slow = {"name": "slow_compute", "arguments": {"seconds": 300}}
    with ExtClient(workers.srv.url, headers=ALICE_NEW_CONNECTIONS, timeout=60) as ext:
        long = [ext.result("tools/call", slow)["taskId"] for _ in range(6)]
        (mine,) = [i for i in workers.instances() if f":{victim}:" in i]
        on_victim = workers.owned(mine)  # empty when no connection reached it: still checked
        assert on_victim <= set(long)
        # A worker that dies within STARTUP_S of its start is taken for one that could not
        # start (the parent stops the set): kill it once it has run well past that, by its
        # own start time (the kernel's). The parent's clock starts a moment later (after the
        # exec); the margin covers that moment on a loaded machine.
        until(
            lambda: _age_s(victim) > STARTUP_S + STARTUP_MARGIN_S,
            STARTUP_S + 120,
            interval=0.2,
            what="the victim runs past its start-up",
        )
        os.kill(victim, signal.SIGKILL)

        def replaced() -> bool:
            assert proc.poll() is None, f"the parent stopped:\n{workers.srv.log()[-3000:]}"
            said = f"worker {victim} exited with status -9: starting another" in workers.srv.log()
            return said and len([p for p in _children(proc.pid) if p != victim]) == WORKERS

        until(replaced, 120, interval=0.2, what="the parent starts another worker")
        for tid in on_victim:
            failed = ext.wait(tid, timeout=90)
            assert failed["status"] == "failed", failed
            # reaped by the survivor's sweep (its lease expired) or by the new worker's start
            assert "stopped" in failed.get("statusMessage", ""), failed
        for tid in set(long) - on_victim:  # the surviving worker's tasks run on
            assert ext.result("tasks/get", {"taskId": tid})["status"] == "working"
        call = {"name": "slow_compute", "arguments": {"seconds": 0, "label": "after"}}
        for _ in range(4):  # served whichever worker, the new one included, gets it
            done = ext.wait(ext.result("tools/call", call)["taskId"], timeout=60)
            assert _text(done["result"]) == "done after 0s (after)"
    assert proc.poll() is None


def test_a_worker_that_cannot_start_stops_the_set(tmp_path: Path, tokens_file: Path) -> None:
    """A worker that exits within its start-up window stops the set (exit 1, saying why):
    here every worker finds its Redis unreachable at start. The window is
    ``testkit.patient_workers``' (the 5 s of the shipped parent can pass before a loaded
    machine has even imported the server, and then the parent, rightly, replaces the worker
    instead). A mistake the parent can see itself (a bad ``--tokens`` file) stops it before
    any worker starts: one line, exit 2."""
    # the example server, its workers given a start-up window a loaded machine cannot miss
    argv = [sys.executable, "-m", "testkit.patient_workers"]
    argv += ["--http", f"127.0.0.1:{free_port()}", "--workers", str(WORKERS), "--stateless"]
    unreachable = f"redis://127.0.0.1:{free_port()}/0"

    def start(tokens: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*argv, "--tokens", str(tokens), "--store", unreachable],
            capture_output=True,
            text=True,
            timeout=240,
            env=python_env(),
        )

    out = start(tokens_file)
    assert out.returncode == 1, out.stderr
    assert "after its start: stopping the others" in out.stderr
    assert f"--store {unreachable}: the store does not answer" in out.stderr
    bad = write_tokens(tmp_path / "bad.json", {})
    bad.write_text("[]")  # not a JSON object
    parent = start(bad)
    assert parent.returncode == 2, parent.stderr
    assert "--tokens" in parent.stderr and "expected a JSON object" in parent.stderr
    assert "stopping the others" not in parent.stderr


@pinned(ENDPOINT)
def test_sigterm_stops_every_worker_cleanly(workers: Workers) -> None:
    """Process supervision only (no request reaches a front door): run on the default one."""
    proc = workers.take_proc()
    children = _children(proc.pid)
    assert len(children) == WORKERS
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    until(lambda: all(_exited(pid) for pid in children), what="every worker exits")
    assert workers.instances() == []  # each worker closed its store: its lease is gone


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
@pinned(ENDPOINT)
def test_workers_exit_when_the_parent_is_killed(workers: Workers) -> None:
    """Process supervision only (no request reaches a front door): run on the default one."""
    proc = workers.take_proc()
    children = _children(proc.pid)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    until(lambda: all(_exited(pid) for pid in children), what="no orphan worker keeps serving")
