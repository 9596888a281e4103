"""``--workers 2``: two example-server processes behind one port, sharing one Redis.

The kernel picks the worker of each connection, so the tests cannot steer a request to a
worker: they spread requests over many connections (several SDK sessions, each with its
own HTTP client; a raw client that closes the connection after each request) and check
that every answer is right whichever worker gave it. A task created through one
connection is read, waited on (``tasks/result`` blocks until the task ends, woken through
Redis when the other worker finishes it) and cancelled through others. Stopping: SIGTERM
to the parent stops every worker (each closes its store); a worker that dies stops the
set; a parent that dies takes its workers with it (Linux).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
import redis
from ext_wire import ExtClient
from mcp.shared.exceptions import MCPError
from mcp_e2e import HttpServer, http_session
from redis_fixtures import RedisServer, redis_server, unique_namespace  # noqa: F401

from mcp_tasks.examples.server import main

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

WORKERS = 2
Started = tuple[HttpServer, Callable[[], int]]


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


def _until(check: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


@pytest.fixture
def workers(
    http_server_factory: Callable[..., HttpServer],
    tokens_file: Path,
    redis_server: RedisServer,  # noqa: F811
) -> Started:
    """The example server with ``--workers 2`` on a Redis namespace of its own, once both
    workers' stores are up; and a function counting the instances heartbeating there."""
    ns = unique_namespace()
    store = f"{redis_server.url}?namespace={ns}&lease=2"
    srv = http_server_factory(
        "--workers", str(WORKERS), "--stateless", "--tokens", str(tokens_file), "--store", store
    )
    client = redis.Redis(port=redis_server.port)

    def instances() -> int:
        return int(client.zcard(f"{ns}:instances"))

    _until(lambda: instances() == WORKERS, "both workers' stores heartbeat")
    return srv, instances


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


async def test_create_through_one_connection_fetch_through_others(workers: Started) -> None:
    srv, _ = workers
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
        long = (await s0.tasks.call_tool_as_task("slow_compute", {"seconds": 120})).task.taskId
        caught: list[MCPError] = []

        async def hold_result() -> None:
            try:
                await s1.tasks.result(long)
            except MCPError as exc:
                caught.append(exc)

        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                tg.start_soon(hold_result)
                await anyio.sleep(0.5)
                assert (await s2.tasks.cancel(long)).status.value == "cancelled"
        assert caught and caught[0].code == -32800


def test_extension_face_on_a_new_connection_per_request(workers: Started) -> None:
    srv, _ = workers
    alice = {"Authorization": "Bearer tok-alice", "Connection": "close"}
    with ExtClient(srv.url, headers=alice, timeout=60) as ext:
        call = {"name": "slow_compute", "arguments": {"seconds": 0.2, "label": "x"}}
        ids = [ext.result("tools/call", call)["taskId"] for _ in range(6)]
        for tid in ids:
            done = ext.wait(tid, timeout=60)
            assert done["status"] == "completed"
            assert _text(done["result"]) == "done after 0.2s (x)"
        slow = ext.result("tools/call", {"name": "slow_compute", "arguments": {"seconds": 120}})
        ext.result("tasks/cancel", {"taskId": slow["taskId"]})
        assert ext.wait(slow["taskId"], timeout=60)["status"] == "cancelled"


def test_sigterm_stops_every_worker_cleanly(workers: Started) -> None:
    srv, instances = workers
    proc, srv.proc = srv.proc, None
    assert proc is not None
    children = _children(proc.pid)
    assert len(children) == WORKERS
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    _until(lambda: all(_exited(pid) for pid in children), "every worker exits")
    assert instances() == 0  # each worker closed its store: its lease is gone


def test_a_dead_worker_stops_the_set(workers: Started) -> None:
    srv, _ = workers
    proc, srv.proc = srv.proc, None
    assert proc is not None
    first, *others = _children(proc.pid)
    os.kill(first, signal.SIGKILL)
    assert proc.wait(timeout=60) == 1
    _until(lambda: all(_exited(pid) for pid in others), "the other workers exit")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_workers_exit_when_the_parent_is_killed(workers: Started) -> None:
    srv, _ = workers
    proc, srv.proc = srv.proc, None
    assert proc is not None
    children = _children(proc.pid)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    _until(lambda: all(_exited(pid) for pid in children), "no orphan worker keeps serving")
