"""``--workers 2``: two example-server processes behind one port, sharing one Redis.

The kernel picks the worker of each connection, so the tests cannot steer a request to a
worker: they spread requests over many connections (several SDK sessions, each with its
own HTTP client; a raw client that closes the connection after each request) and check
that every answer is right whichever worker gave it. A task created through one
connection is read, waited on (``tasks/result`` blocks until the task ends, woken through
Redis when the other worker finishes it) and cancelled through others. A worker killed
mid-task is replaced, and the tasks it ran fail once its lease expires (reaped by the
other worker's sweep) while the others' tasks run on. A worker killed again and again as
it starts is replaced after a back-off while the healthy one answers every request; the
parent gives up (exit 1, one line) only when every worker keeps dying as it starts.
Stopping: SIGTERM to the parent stops every worker (each closes its store); a parent that
dies takes its workers with it (Linux).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
import redis
from mcp.shared.exceptions import MCPError

from mcp_tasks.examples.server import main
from mcp_tasks.examples.workers import MAX_EARLY_EXITS, serve_workers
from testkit.doors import ENDPOINT, pinned
from testkit.ext_wire import ExtClient
from testkit.mcp_e2e import HttpServer, cancel_while_result_held, http_session, write_tokens
from testkit.procs import free_port, python_env, refusing_port
from testkit.redis_fixtures import RedisServer, redis_server, unique_namespace  # noqa: F401
from testkit.wait import until

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.slow,
    pytest.mark.door_agnostic,
]  # server worker processes: the door is not what is tested (testkit.doors)

WORKERS = 2
#: the extension's ``greet``: answered by whichever worker takes the connection
GREET = {"name": "greet", "arguments": {"name": "x"}}


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
        os.kill(victim, signal.SIGKILL)  # young or old: replaced (at once, or after 0.5 s)

        def replaced() -> bool:
            assert proc.poll() is None, f"the parent stopped:\n{workers.srv.log()[-3000:]}"
            said = f"worker {victim} exited with status -9" in workers.srv.log()
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


def test_workers_killed_young_are_replaced_the_healthy_one_serves(workers: Workers) -> None:
    """A worker killed, then each of its replacements killed as it appears (long before it
    could serve), twice: the parent replaces each after a back-off and stays up, the healthy
    worker answers every request meanwhile (each on a new connection, so the kernel could
    hand it to any live worker), and the third replacement lives and joins the store."""
    proc = workers.srv.proc
    assert proc is not None
    healthy, victim = _children(proc.pid)
    dead = {victim}
    answered = 0

    def serve_one() -> None:
        nonlocal answered
        assert proc.poll() is None, f"the parent stopped:\n{workers.srv.log()[-3000:]}"
        got = ext.send("tools/call", GREET)
        assert _text(got["result"]) == "Hello, x!", got
        answered += 1

    def replacement() -> int | None:
        serve_one()
        new = [p for p in _children(proc.pid) if p != healthy and p not in dead]
        return new[0] if new else None

    with ExtClient(workers.srv.url, headers=ALICE_NEW_CONNECTIONS, timeout=60) as ext:
        os.kill(victim, signal.SIGKILL)
        for _ in range(2):
            young = until(replacement, 120, interval=0.02, what="the parent starts another")
            os.kill(young, signal.SIGKILL)  # as it appears: it has not even imported the server
            dead.add(young)
        survivor = until(replacement, 120, interval=0.02, what="the parent starts another")

        def survivor_joined() -> bool:
            serve_one()
            return any(f":{survivor}:" in i for i in workers.instances())

        until(survivor_joined, 120, interval=0.1, what="the last replacement's store heartbeats")
        assert healthy in _children(proc.pid) and answered >= 3
    log = workers.srv.log()
    assert log.count("after its start: starting another in") >= 2, log[-3000:]
    assert "giving up" not in log and proc.poll() is None, log[-3000:]


#: A stand-in worker for the supervisor's own tests: notes its start in ``started/``; the
#: first to create ``healthy`` (when ``one-healthy`` exists) writes its pid there and runs
#: until SIGTERM, every other exits at once (status 3).
_STAND_IN = """
import os, pathlib, signal, sys, time
here = pathlib.Path(__file__).parent
(here / "started" / str(os.getpid())).touch()
if (here / "one-healthy").exists():
    try:
        fd = os.open(here / "healthy", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        sys.exit(3)
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        time.sleep(1)
sys.exit(3)
"""


def _stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, one_healthy: bool) -> str:
    """The module name of the stand-in worker, importable by the children."""
    (tmp_path / "started").mkdir()
    (tmp_path / "stand_in_worker.py").write_text(_STAND_IN)
    if one_healthy:
        (tmp_path / "one-healthy").touch()
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    return "stand_in_worker"


#: the supervisor's back-off, small for its own tests: 0.01 s doubling up to 0.04 s
FAST = {"backoff_s": 0.01, "backoff_max_s": 0.04, "max_early_exits": 3}


def test_every_worker_exiting_at_start_gives_up_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """Every slot's worker exits as it starts: each is started again after a doubling
    back-off, and after ``max_early_exits`` early exits of every slot the parent stops,
    exit 1 with one line saying why."""
    module = _stand_in(tmp_path, monkeypatch, one_healthy=False)
    status = serve_workers(module, [], "127.0.0.1", free_port(), WORKERS, **FAST)
    err = capfd.readouterr().err
    assert status == 1, err
    lines = err.strip().splitlines()
    assert lines[-1].startswith("giving up: every worker exited within 5s"), err
    assert "3 times in a row (the last: worker" in lines[-1] and err.count("giving up") == 1
    assert len(list((tmp_path / "started").iterdir())) >= WORKERS * 3, err
    for delay in ("0.01", "0.02"):  # the back-off doubles
        assert err.count(f"starting another in {delay}s") == WORKERS, err


def test_a_healthy_worker_keeps_the_set_up_however_often_another_dies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """One slot's worker serves, the other's exits at every start: the parent keeps
    starting the failing one (its back-off capped) well past ``max_early_exits`` and never
    stops the healthy one, until SIGTERM (exit 0)."""
    module = _stand_in(tmp_path, monkeypatch, one_healthy=True)
    started = tmp_path / "started"

    def stop_when_retried_enough() -> None:
        until(lambda: len(list(started.iterdir())) >= 1 + 3 * FAST["max_early_exits"], 120)
        os.kill(os.getpid(), signal.SIGTERM)  # the parent's own handler: stop the set

    stopper = threading.Thread(target=stop_when_retried_enough, daemon=True)
    stopper.start()
    status = serve_workers(module, [], "127.0.0.1", free_port(), WORKERS, **FAST)
    stopper.join(10)
    err = capfd.readouterr().err
    assert status == 0, err
    assert "giving up" not in err and "starting another in 0.04s" in err, err
    healthy = (tmp_path / "healthy").read_text()
    assert f"worker {healthy} exited" not in err, err  # stopped only by the SIGTERM


def test_workers_that_cannot_start_stop_the_set(tmp_path: Path, tokens_file: Path) -> None:
    """Workers that all exit within their start-up window, again and again, stop the set
    (exit 1, one line saying why) after ``MAX_EARLY_EXITS`` starts each: here every worker
    finds its Redis unreachable at start. The window is ``testkit.patient_workers``' (the
    5 s of the shipped parent can pass before a loaded machine has even imported the
    server, and then the parent, rightly, replaces the worker at once instead). A mistake
    the parent can see itself (a bad ``--tokens`` file) stops it before any worker starts:
    one line, exit 2."""
    # the example server, its workers given a start-up window a loaded machine cannot miss
    argv = [sys.executable, "-m", "testkit.patient_workers"]
    argv += ["--http", f"127.0.0.1:{free_port()}", "--workers", str(WORKERS), "--stateless"]
    with refusing_port() as redis_port:  # nothing answers there for the whole test
        unreachable = f"redis://127.0.0.1:{redis_port}/0"

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
        last = out.stderr.strip().splitlines()[-1]
        assert last.startswith("giving up: every worker exited within"), out.stderr
        assert out.stderr.count("giving up") == 1, out.stderr
        said = out.stderr.count(f"--store {unreachable}: the store does not answer")
        assert said >= WORKERS * MAX_EARLY_EXITS, out.stderr
        bad = write_tokens(tmp_path / "bad.json", {})
        bad.write_text("[]")  # not a JSON object
        parent = start(bad)
        assert parent.returncode == 2, parent.stderr
        assert "--tokens" in parent.stderr and "expected a JSON object" in parent.stderr
        assert "exited with status" not in parent.stderr and "giving up" not in parent.stderr


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
