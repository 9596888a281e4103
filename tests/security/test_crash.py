"""SIGKILL under load with the SQLite store (and Redis), then restart.

Four client threads create tasks (instant, short, long, ``input_required``),
poll them and fetch the results of the finished ones while the server is
killed with SIGKILL. After a restart on the same database file:

- every task the server ever answered a ``CreateTaskResult`` for still exists;
- every task reported finished before the kill has the same status and exactly
  the same ``tasks/result`` answer (result or JSON-RPC error);
- every task interrupted by the kill is ``failed`` with a ``statusMessage``, and
  its ``tasks/result`` answers a JSON-RPC error (-32603) with a message.

Tasks are bound to a bearer-token subject so that they survive the restart (R-SEC-1).
With Redis the restarted instance is a new one: the killed instance's tasks become
``failed`` once its lease (2 s here) runs out, so the check waits for that.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from testkit.redis_fixtures import RedisServer, fresh_redis_server
from testkit.sec_harness import HttpServer, RawHttp
from testkit.wait import until

# crashes and restarts: the door is not what is tested (testkit.doors)
pytestmark = pytest.mark.door_agnostic

__all__ = ["fresh_redis_server"]  # the Redis of the redis store_arg

TERMINAL = {"completed", "failed", "cancelled"}
THREADS = 4
#: tasks the load has seen finish (and fetched) when the server is killed mid-request
KILL_AFTER_FINISHED = 20


class Load:
    def __init__(self, url: str) -> None:
        self.url = url
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.created: set[str] = set()
        self.finished: dict[str, tuple[str, dict[str, Any]]] = {}  # id -> (status, answer)
        self.long: set[str] = set()
        self.errors: list[str] = []

    def worker(self, seed: int) -> None:
        rng = random.Random(seed)
        try:
            with RawHttp(self.url, token="tok-alice", timeout=10) as c:
                mine: list[str] = []
                while not self.stop.is_set():
                    kind = rng.random()
                    if kind < 0.6:
                        args = {
                            "seconds": rng.choice([0, 0, 0.05, 0.2]),
                            "label": f"L{rng.random()}",
                        }
                        tid = c.create("slow_compute", args)
                    elif kind < 0.7:
                        tid = c.create("slow_compute", {"seconds": 600})
                        with self.lock:
                            self.long.add(tid)
                    elif kind < 0.8:
                        tid = c.create("confirm_delete", {"path": f"/p{rng.random()}"})
                        with self.lock:
                            self.long.add(tid)
                    elif kind < 0.9:
                        tid = c.create(rng.choice(["failing_job", "protocol_error_job"]), {})
                    else:
                        tid = ""
                    if tid:
                        with self.lock:
                            self.created.add(tid)
                        mine.append(tid)
                    for t in list(mine):
                        task = c.ok("tasks/get", {"taskId": t})
                        if task["status"] in TERMINAL:
                            answer = c.call("tasks/result", {"taskId": t})
                            answer.pop("id", None)
                            with self.lock:
                                self.finished[t] = (task["status"], answer)
                            mine.remove(t)
                    time.sleep(0.01)  # the load's pace
        except (httpx.HTTPError, AssertionError, OSError) as exc:
            if not self.stop.is_set():
                self.errors.append(repr(exc))


@pytest.fixture(params=["sqlite", "redis"])
def store_arg(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:{tmp_path / 'crash.db'}"
    redis: RedisServer = request.getfixturevalue("fresh_redis_server")
    return f"{redis.url}?namespace=crash&lease=2"


def _settled(c: RawHttp, created: set[str], timeout: float = 60) -> dict[str, dict[str, Any]]:
    """The listing once every created task is terminal (Redis: after the dead lease)."""

    def listing() -> tuple[dict[str, dict[str, Any]], list[str]]:
        listed = {t["taskId"]: t for t in c.list_all()}
        return listed, [t for t in created if listed.get(t, {}).get("status") not in TERMINAL]

    listed, _ = until(
        listing, timeout, satisfied=lambda got: not got[1], interval=0.2, what="all settled"
    )
    return listed


def test_sigkill_under_load(
    server_factory: Callable[..., HttpServer], tokens_file: Path, store_arg: str
) -> None:
    args = ("--store", store_arg, "--tokens", str(tokens_file))
    limits = {"rate_limit_calls": 1_000_000}  # four busy pollers of one subject
    server = server_factory(*args, engine_config=limits)
    load = Load(server.url)
    threads = [threading.Thread(target=load.worker, args=(i,), daemon=True) for i in range(THREADS)]
    for t in threads:
        t.start()

    def loaded() -> bool:  # results fetched, and tasks that cannot end before the kill
        assert not load.errors, load.errors
        with load.lock:
            return len(load.finished) >= KILL_AFTER_FINISHED and bool(load.long)

    until(loaded, what="the load is under way")
    assert not load.errors, load.errors
    server.kill()  # SIGKILL while the workers are mid-request
    load.stop.set()
    for t in threads:
        t.join(timeout=30)
    with load.lock:
        created = set(load.created)
        finished = dict(load.finished)
        long = set(load.long)
    assert len(finished) >= 5 and long, (len(created), len(finished), len(long))

    server = server_factory(*args, engine_config=limits)
    with RawHttp(server.url, token="tok-alice") as c:
        listed = _settled(c, created)
        missing = created - set(listed)
        assert not missing, f"{len(missing)} tasks lost by the crash"
        for tid, (status, answer) in finished.items():
            assert listed[tid]["status"] == status, (tid, listed[tid], status)
            again = c.call("tasks/result", {"taskId": tid})
            again.pop("id", None)
            assert again == answer, (tid, again, answer)
        interrupted = [tid for tid in created if tid not in finished]
        for tid in interrupted:
            task = listed[tid]
            assert task["status"] in TERMINAL, task
            if tid in long:  # could not have finished before the kill
                assert task["status"] == "failed" and task.get("statusMessage"), task
                err = c.call("tasks/result", {"taskId": tid})["error"]
                assert err["code"] == -32603 and err["message"], err
        # and the restarted server works normally
        tid = c.create("slow_compute", {"seconds": 0, "label": "reborn"})
        c.wait(tid)
        assert (
            c.ok("tasks/result", {"taskId": tid})["content"][0]["text"] == "done after 0s (reborn)"
        )
    print(
        f"crash: {len(created)} created, {len(finished)} finished before SIGKILL, "
        f"{len(interrupted)} interrupted"
    )
