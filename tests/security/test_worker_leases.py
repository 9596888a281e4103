"""A run on a worker is alive while its worker is: a tool that holds its worker's event loop
keeps its job, and a worker that was stopped never runs its job beside the run that took
it over (R-STATE-*: one outcome per task).

The front end is in the test's process (``McpTasks`` on a real Redis, its tools declared
``on_workers``, ``testkit.stalling_tools``), two workers are real subprocesses
(``python -m mcp_tasks.worker``) with a redelivery timeout of 1 s:

- ``block`` holds its worker's loop for 4 s (four redelivery timeouts; a blocking call in
  an ``async`` tool): the other worker never takes it, and it completes once (before: the
  other worker took the job as its worker's death and failed it, "not retried", while the
  first ran it to its end);
- ``ticks`` (retried) runs on a worker that is then stopped (``SIGSTOP``) until the other
  worker has run it a while: that run completes the task, and the stopped worker, once
  continued, stops its run at once (at most the one step already due), storing nothing
  (before: both ran it at once to their ends).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import redis as redis_py

from mcp_tasks.runtime.serve.offload import attempts_key
from mcp_tasks.runtime.serve.router import TaskRequest
from mcp_tasks.runtime.stores.redis import RedisTaskStore
from testkit.ext_wire import META, REVISION, TASKS_EXTENSION
from testkit.redis_fixtures import RedisServer, redis_server, unique_namespace  # noqa: F401
from testkit.stalling_tools import WORKER_APP, build
from testkit.task_workers import WorkerProc
from testkit.wait import until_async

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

#: seconds a dead worker's job waits for another worker
REDELIVERY_S = 1.0
ENVELOPE = {
    f"{META}protocolVersion": REVISION,
    f"{META}clientInfo": {"name": "worker-leases", "version": "0"},
    f"{META}clientCapabilities": {"extensions": {TASKS_EXTENSION: {}}},
}
TERMINAL = {"completed", "failed", "cancelled"}


class Front:
    """The front end (in this process), its workers and their Redis namespace."""

    def __init__(self, server: RedisServer, log_dir: Path) -> None:
        self.ns = unique_namespace()
        self.url = f"{server.url}?namespace={self.ns}"
        self.log_dir = log_dir
        self.redis = redis_py.Redis(port=server.port, decode_responses=True)
        self.workers: list[WorkerProc] = []
        self.tasks: Any = None

    def worker(self) -> WorkerProc:
        w = WorkerProc(self.url, self.log_dir, redelivery_s=REDELIVERY_S, app=WORKER_APP)
        self.workers.append(w.start())
        return w

    async def call(self, tool: str, arguments: dict[str, Any]) -> str:
        params = {"name": tool, "arguments": arguments, "_meta": ENVELOPE}
        created = await self.tasks.router.route(TaskRequest(REVISION, "tools/call", params, 1, "t"))
        return str(created["taskId"])

    async def ended(self, task_id: str, timeout: float = 60) -> Any:
        store = self.tasks.engine.store

        async def terminal() -> Any:
            rec = await store.get(task_id)
            return rec if rec is not None and rec.status.value in TERMINAL else None

        return await until_async(terminal, timeout, what=f"task {task_id} ends")

    def runs(self, task_id: str) -> int:
        return sum(w.runs_of(task_id) for w in self.workers)

    def attempts(self, task_id: str) -> int:
        return int(self.redis.get(attempts_key(self.ns, task_id)) or 0)


@pytest.fixture
async def front(
    redis_server: RedisServer,  # noqa: F811
    tmp_path: Path,
) -> AsyncIterator[Front]:
    f = Front(redis_server, tmp_path)
    store = RedisTaskStore.from_url(f.url)
    f.tasks = build(store)
    try:
        async with f.tasks:
            yield f
    finally:
        for w in f.workers:
            if w.proc is not None and w.proc.poll() is None:
                os.kill(w.pid, signal.SIGCONT)
            w.stop()
        await store.close()
        f.redis.close()


async def test_a_tool_holding_its_workers_loop_keeps_its_job(front: Front) -> None:
    """``block`` holds its worker's event loop for four redelivery timeouts (not retried):
    the other worker never takes its job, and the task completes once, with its result."""
    front.worker()
    front.worker()
    task_id = await front.call("block", {"seconds": 4 * REDELIVERY_S})
    rec = await front.ended(task_id)
    assert rec.status.value == "completed", (rec.status, rec.status_message)
    assert rec.result["content"][0]["text"].startswith("blocked 4s in ")
    await anyio.sleep(3 * REDELIVERY_S)  # a late redelivery would show now
    assert front.runs(task_id) == 1 and front.attempts(task_id) == 1


def _trace(path: Path) -> Iterator[tuple[int, float]]:
    for line in path.read_text().splitlines():
        pid, at = line.split()
        yield int(pid), float(at)


async def test_a_stopped_worker_never_runs_its_job_beside_the_next_run(
    front: Front, tmp_path: Path
) -> None:
    """``ticks`` (retried): its worker stopped (``SIGSTOP``) past the redelivery timeout, the
    other worker runs it; the stopped one, continued 1 s into that run, stops its own at
    once (at most the tick already due), storing nothing; the task completes with the
    second run's result, two runs counted."""
    first, second = front.worker(), front.worker()
    trace = tmp_path / "ticks.txt"
    task_id = await front.call("ticks", {"path": str(trace), "seconds": 6})
    await until_async(lambda: trace.exists() and trace.read_text(), 30, what="the tool ticks")
    stopped, other = (first, second) if first.runs_of(task_id) else (second, first)
    os.kill(stopped.pid, signal.SIGSTOP)
    try:
        await until_async(
            lambda: any(pid == other.pid for pid, _ in _trace(trace)),
            30,
            what="the other worker runs the job",
        )
        await anyio.sleep(1.0)
    finally:
        continued = time.time()
        os.kill(stopped.pid, signal.SIGCONT)
    rec = await front.ended(task_id)
    assert rec.status.value == "completed", (rec.status, rec.status_message)
    assert rec.result["content"][0]["text"] == f"ticked 6s in {other.pid}"
    ticks = list(_trace(trace))
    began = min(at for pid, at in ticks if pid == other.pid)
    late = [at for pid, at in ticks if pid == stopped.pid and at >= began]
    assert len(late) <= 1 and all(at < continued + 0.5 for at in late), (late, continued)
    await until_async(
        lambda: "superseded: no outcome stored" in stopped.log(), 10, what="its run stops"
    )
    assert front.attempts(task_id) == 2 and front.runs(task_id) == 2
