"""Task work on worker processes: the example server ``--on-workers`` as a real subprocess
(the front end: it accepts calls and answers ``tasks/*``), workers (``python -m
mcp_tasks.worker``) as real subprocesses, one real ``redis-server`` for the tasks and
Docket's jobs; both faces.

What a tool on a worker keeps: its result, progress (2025-11-25 notifications to the
original token, R-PROGRESS-1; the extension's ``statusMessage``, X-NOTIF-7), elicitation
through the shared store's input hand-over (R-INPUT-1..4; X-UPD-1), cancellation
(R-CANCEL-2). Delivery: ``kill -9`` of the worker during a retryable task (it runs again on
another worker, at most its attempts, one outcome) and during a task that is not retried (it
fails, saying its worker stopped); a restart of the front end and every worker with work
queued (nothing accepted is lost).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import redis

from mcp_tasks.runtime.offload import attempts_key
from mcp_tasks.runtime.worker import NOT_RETRIED_MESSAGE
from testkit.ext_wire import ExtClient
from testkit.mcp_e2e import HttpServer, http_session, text_of
from testkit.redis_fixtures import RedisServer, redis_server, unique_namespace  # noqa: F401
from testkit.task_workers import WorkerProc
from testkit.wait import until, until_async

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ALICE = {"Authorization": "Bearer tok-alice"}
#: how many more times the front end lets slow_compute run when its worker dies
RETRIES = 1


class Setup:
    """The front end, its workers, their Redis namespace and a client of that Redis."""

    def __init__(
        self,
        factory: Callable[..., HttpServer],
        tokens: Path,
        server: RedisServer,
        log_dir: Path,
    ) -> None:
        self.ns = unique_namespace()
        self.store = f"{server.url}?namespace={self.ns}"
        self.args = (
            "--tokens", str(tokens), "--store", self.store,
            "--on-workers", "--worker-retries", str(RETRIES),
        )  # fmt: skip
        self.factory = factory
        self.front: HttpServer = factory(*self.args)
        self.log_dir = log_dir
        self.workers: list[WorkerProc] = []
        self.redis = redis.Redis(port=server.port, decode_responses=True)

    def worker(self) -> WorkerProc:
        w = WorkerProc(self.store, self.log_dir).start()
        self.workers.append(w)
        return w

    def attempts(self, task_id: str) -> int:
        """How many runs of the task workers began (the store's counter)."""
        return int(self.redis.get(attempts_key(self.ns, task_id)) or 0)

    def runs(self, task_id: str) -> int:
        """How many times workers started the task's tool (every worker's log)."""
        return sum(
            1
            for log in self.log_dir.glob("worker-*.log")
            for line in log.read_text(errors="replace").splitlines()
            if f"task {task_id}: running" in line
        )

    def close(self) -> None:
        for w in self.workers:
            w.stop()
        self.redis.close()


@pytest.fixture
def setup(
    http_server_factory: Callable[..., HttpServer],
    tokens_file: Path,
    redis_server: RedisServer,  # noqa: F811
    tmp_path: Path,
) -> Iterator[Setup]:
    s = Setup(http_server_factory, tokens_file, redis_server, tmp_path)
    try:
        yield s
    finally:
        s.close()


def _slow(seconds: float, label: str) -> dict[str, Any]:
    return {"name": "slow_compute", "arguments": {"seconds": seconds, "label": label}}


# ---------------------------------------------------------------- what a tool keeps


async def test_core_task_runs_on_a_worker_with_progress_to_the_token(setup: Setup) -> None:
    """2025-11-25: the front end stores the task and a worker runs the tool; the client
    gets the result through ``tasks/result`` and the tool's progress notifications to the
    original token (R-PROGRESS-1), relayed by the front end that holds the session."""
    worker = setup.worker()
    progress: list[types.ProgressNotificationParams] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ProgressNotification):
            progress.append(message.params)

    async with http_session(setup.front.url, token="tok-alice", message_handler=on_message) as s:
        created = await s.tasks.call_tool_as_task(
            "slow_compute", {"seconds": 1, "label": "far"}, progress_token="p-7"
        )
        task_id = created.task.taskId
        result = await s.tasks.tool_result(task_id)
        await until_async(lambda: len(progress) >= 10, 30, what="every step's progress")
    assert text_of(result) == "done after 1s (far)"
    assert all(p.progress_token == "p-7" for p in progress)  # R-PROGRESS-1
    assert worker.runs_of(task_id) == 1
    assert "running" not in setup.front.log()


def test_extension_task_runs_on_a_worker_with_progress_as_status_message(setup: Setup) -> None:
    """The extension face: the task's ``statusMessage`` shows the tool's progress while it
    runs on the worker (X-NOTIF-7), and ``tasks/get`` inlines the result when it completes."""
    worker = setup.worker()
    with ExtClient(setup.front.url, headers=ALICE) as alice:
        task_id = alice.result("tools/call", _slow(1.5, "ext"))["taskId"]
        seen = until(
            lambda: alice.result("tasks/get", {"taskId": task_id}),
            30,
            satisfied=lambda t: str(t.get("statusMessage", "")).startswith("step "),
            what="progress as statusMessage",
        )
        done = alice.wait(task_id)
    assert seen["status"] == "working"
    assert done["status"] == "completed"
    assert "done after 1.5s (ext)" in str(done["result"])
    assert worker.runs_of(task_id) == 1
