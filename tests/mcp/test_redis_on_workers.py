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

import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import redis

from mcp_tasks.runtime.serve.offload import attempts_key
from mcp_tasks.runtime.worker.run import NOT_RETRIED_MESSAGE
from testkit.example_server import ServerPool
from testkit.ext_wire import ExtClient
from testkit.mcp_e2e import TOKENS, HttpServer, http_session, text_of, write_tokens
from testkit.redis_fixtures import RedisServer, redis_server, unique_namespace  # noqa: F401
from testkit.task_workers import WorkerProc
from testkit.wait import until, until_async

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.slow,
    pytest.mark.door_agnostic,
]  # workers: the door is not what is tested (testkit.doors)

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

    def one_worker(self) -> WorkerProc:
        """The worker of a shared setup (started on first use)."""
        return self.workers[0] if self.workers else self.worker()

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


@pytest.fixture(scope="module")
def shared(
    http_server_pool: ServerPool,
    front_door: str,
    redis_server: RedisServer,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Setup]:
    """One front end and one worker for the tests that neither kill nor restart them: each
    test's tasks are its own (task ids), and what it checks is per task."""
    log_dir = tmp_path_factory.mktemp("workers")
    tokens = write_tokens(log_dir / "tokens.json", TOKENS)
    s = Setup(lambda *args: http_server_pool.get(front_door, *args), tokens, redis_server, log_dir)
    try:
        yield s
    finally:
        s.close()


def _slow(seconds: float, label: str) -> dict[str, Any]:
    return {"name": "slow_compute", "arguments": {"seconds": seconds, "label": label}}


# ---------------------------------------------------------------- what a tool keeps


async def test_core_task_runs_on_a_worker_with_progress_to_the_token(shared: Setup) -> None:
    """2025-11-25: the front end stores the task and a worker runs the tool; the client
    gets the result through ``tasks/result`` and the tool's progress notifications to the
    original token (R-PROGRESS-1), relayed by the front end that holds the session."""
    worker = shared.one_worker()
    progress: list[types.ProgressNotificationParams] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ProgressNotification):
            progress.append(message.params)

    async with http_session(shared.front.url, token="tok-alice", message_handler=on_message) as s:
        created = await s.tasks.call_tool_as_task(
            "slow_compute", {"seconds": 1, "label": "far"}, progress_token="p-7"
        )
        task_id = created.task.taskId
        result = await s.tasks.tool_result(task_id)
        await until_async(lambda: len(progress) >= 10, 30, what="every step's progress")
    assert text_of(result) == "done after 1s (far)"
    assert all(p.progress_token == "p-7" for p in progress)  # R-PROGRESS-1
    assert worker.runs_of(task_id) == 1
    assert "running" not in shared.front.log()


def test_extension_task_runs_on_a_worker_with_progress_as_status_message(shared: Setup) -> None:
    """The extension face: the task's ``statusMessage`` shows the tool's progress while it
    runs on the worker (X-NOTIF-7), and ``tasks/get`` inlines the result when it completes."""
    worker = shared.one_worker()
    with ExtClient(shared.front.url, headers=ALICE) as alice:
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


@pytest.mark.parametrize(("action", "outcome"), [("accept", "deleted"), ("decline", "kept")])
async def test_core_elicitation_from_a_worker(shared: Setup, action: str, outcome: str) -> None:
    """R-INPUT-1..4 from a worker: the tool's ``elicitation/create`` goes through the shared
    store to the ``tasks/result`` stream of the front end, stamped with the related task
    (R-INPUT-2); the answer goes back to the worker and the tool goes on."""
    shared.one_worker()
    asked: list[dict[str, Any]] = []
    statuses: list[str] = []

    async def on_elicit(ctx: Any, params: Any) -> types.ElicitResult:
        asked.append(dict(ctx.meta or {}))
        if action == "accept":
            return types.ElicitResult(action="accept", content={"confirm": True})
        return types.ElicitResult(action="decline")

    async with http_session(
        shared.front.url, token="tok-alice", elicitation_callback=on_elicit
    ) as s:
        result = await s.tasks.run_tool(
            "confirm_delete",
            {"path": "/tmp/w"},
            on_status=lambda t: statuses.append(t.status.value),
        )
    assert text_of(result) == f"{outcome} /tmp/w"
    assert len(asked) == 1
    related = asked[0]["io.modelcontextprotocol/related-task"]
    assert related["taskId"]  # R-INPUT-2


def test_extension_elicitation_from_a_worker(shared: Setup) -> None:
    """X-UPD-1 from a worker: ``tasks/get`` lists the tool's elicitation as an input request
    (``input_required``), ``tasks/update`` answers it, and the worker's tool completes."""
    shared.one_worker()
    with ExtClient(shared.front.url, headers=ALICE) as alice:
        call = {"name": "confirm_delete", "arguments": {"path": "/tmp/e"}}
        task_id = alice.result("tools/call", call)["taskId"]
        asking = alice.wait(task_id, frozenset({"input_required"}))
        (key, request), *more = asking["inputRequests"].items()
        assert not more
        assert request["method"] == "elicitation/create"
        answer = {"action": "accept", "content": {"confirm": True}}
        alice.result("tasks/update", {"taskId": task_id, "inputResponses": {key: answer}})
        done = alice.wait(task_id)
    assert done["status"] == "completed"
    assert "deleted /tmp/e" in str(done["result"])


async def test_cancel_reaches_the_tool_on_the_worker(shared: Setup) -> None:
    """R-CANCEL-2 across processes: ``tasks/cancel`` on the front end stops the tool on the
    worker (woken by the store's change event); the task stays cancelled, and the worker
    stores no outcome after it."""
    worker = shared.one_worker()
    async with http_session(shared.front.url, token="tok-alice") as s:
        created = await s.tasks.call_tool_as_task("slow_compute", {"seconds": 120, "label": "c"})
        task_id = created.task.taskId
        until(lambda: worker.runs_of(task_id) == 1, 30, what="the worker runs the tool")
        cancelled = await s.tasks.cancel(task_id)
        assert cancelled.status.value == "cancelled"
        # The 120 s tool stopped: its run ended on the worker.
        until(lambda: f"task {task_id}: run ended (ended elsewhere)" in worker.log(), 30)
        after = await s.tasks.get(task_id)
    assert after.status.value == "cancelled"
    assert after.statusMessage == "The task was cancelled by the requestor"


# ---------------------------------------------------------------- delivery


def test_kill_9_during_a_retryable_task_runs_it_again_at_most_its_attempts(
    setup: Setup,
) -> None:
    """``slow_compute`` is retried once (``--worker-retries 1``: two attempts). Its worker
    killed mid-run, another worker runs it again (Docket redelivers the job); that one killed
    too, a third worker does not run it a third time: the task fails, saying so. The tool
    ran twice, and the client saw one outcome."""
    first, second = setup.worker(), setup.worker()
    with ExtClient(setup.front.url, headers=ALICE) as alice:
        task_id = alice.result("tools/call", _slow(300, "again"))["taskId"]
        until(lambda: setup.runs(task_id) == 1, 30, what="a worker runs the tool")
        running = first if first.runs_of(task_id) else second
        other = second if running is first else first
        running.kill()
        until(lambda: other.runs_of(task_id) == 1, 60, what="the other worker runs it again")
        assert alice.result("tasks/get", {"taskId": task_id})["status"] == "working"
        other.kill()
        setup.worker()  # a third worker receives the job once more
        done = alice.wait(task_id, timeout=60)
        again = alice.result("tasks/get", {"taskId": task_id})
    assert done["status"] == "failed"
    assert done["statusMessage"] == (
        "Task failed: the workers running it stopped before it finished (2 attempts)"
    )
    assert again == done  # one outcome
    assert setup.runs(task_id) == 2 == setup.attempts(task_id) - 1


async def test_kill_9_during_a_retryable_core_task_completes_it_on_another_worker(
    setup: Setup,
) -> None:
    """2025-11-25: the worker running ``slow_compute`` killed, another one runs it again and
    ``tasks/result`` (blocked on the front end all along) answers its one result."""
    first, second = setup.worker(), setup.worker()
    async with http_session(setup.front.url, token="tok-alice") as s:
        created = await s.tasks.call_tool_as_task("slow_compute", {"seconds": 4, "label": "k"})
        task_id = created.task.taskId
        until(lambda: setup.runs(task_id) == 1, 30, what="a worker runs the tool")
        (first if first.runs_of(task_id) else second).kill()
        result = await s.tasks.tool_result(task_id)
        task = await s.tasks.get(task_id)
    assert text_of(result) == "done after 4s (k)"
    assert task.status.value == "completed"
    assert setup.runs(task_id) == 2


def test_kill_9_during_a_task_not_retried_fails_it(setup: Setup) -> None:
    """``confirm_delete`` is not retried: its worker killed while it waits for input, the
    task fails with a statusMessage saying its worker stopped, and the tool ran once."""
    first = setup.worker()
    with ExtClient(setup.front.url, headers=ALICE) as alice:
        call = {"name": "confirm_delete", "arguments": {"path": "/tmp/k"}}
        task_id = alice.result("tools/call", call)["taskId"]
        alice.wait(task_id, frozenset({"input_required"}))
        first.kill()
        setup.worker()
        done = alice.wait(task_id, timeout=60)
    assert done["status"] == "failed"
    assert done["statusMessage"] == NOT_RETRIED_MESSAGE
    assert setup.runs(task_id) == 1


async def test_kill_9_during_a_core_task_not_retried_fails_it(setup: Setup) -> None:
    """The same on 2025-11-25: ``tasks/get`` says why, ``tasks/result`` answers the error."""
    first = setup.worker()
    async with http_session(setup.front.url, token="tok-alice") as s:
        created = await s.tasks.call_tool_as_task("confirm_delete", {"path": "/tmp/c"})
        task_id = created.task.taskId
        await until_async(
            lambda: _status(s, task_id, "input_required"), 30, what="the tool asks for input"
        )
        first.kill()
        setup.worker()
        await until_async(lambda: _status(s, task_id, "failed"), 60, what="the task fails")
        task = await s.tasks.get(task_id)
    assert task.statusMessage == NOT_RETRIED_MESSAGE
    assert setup.runs(task_id) == 1


async def _status(s: Any, task_id: str, status: str) -> bool:
    return bool((await s.tasks.get(task_id)).status.value == status)


def test_restart_of_everything_with_work_queued(setup: Setup) -> None:
    """Nothing accepted is lost: tasks accepted while no worker runs (queued), and one
    running on a worker, survive ``kill -9`` of the front end and the worker; once a new
    front end and a new worker are up, each completes once, read through the new front end
    on both faces."""
    running_on = setup.worker()
    with ExtClient(setup.front.url, headers=ALICE) as alice:
        running = alice.result("tools/call", _slow(3, "running"))["taskId"]
        until(lambda: running_on.runs_of(running) == 1, 30, what="the worker runs it")
        running_on.kill()
        queued = alice.result("tools/call", _slow(0.2, "queued"))["taskId"]
    core_queued = _core_call(setup.front.url)
    setup.front.kill()

    front = setup.factory(*setup.args)  # the front end again, and a worker again
    with ExtClient(front.url, headers=ALICE) as alice:
        for task_id in (running, queued):
            assert alice.result("tasks/get", {"taskId": task_id})["status"] == "working"
        setup.worker()
        done = {t: alice.wait(t, timeout=60) for t in (running, queued)}
    assert done[running]["status"] == done[queued]["status"] == "completed"
    assert "done after 3s (running)" in str(done[running]["result"])
    assert "done after 0.2s (queued)" in str(done[queued]["result"])
    assert setup.runs(running) == 2 and setup.runs(queued) == 1
    assert _core_result(front.url, core_queued) == "done after 0.1s (core)"
    assert setup.runs(core_queued) == 1


def _core_call(url: str) -> str:
    """A 2025-11-25 task of ``slow_compute`` (0.1 s) created through ``url``; its id."""
    import anyio

    async def call() -> str:
        async with http_session(url, token="tok-alice") as s:
            created = await s.tasks.call_tool_as_task(
                "slow_compute", {"seconds": 0.1, "label": "core"}
            )
            return created.task.taskId

    return anyio.run(call)


def _core_result(url: str, task_id: str) -> str:
    import anyio

    async def result() -> str:
        async with http_session(url, token="tok-alice") as s:
            return text_of(await s.tasks.tool_result(task_id))

    return anyio.run(result)


# ---------------------------------------------------------------- bad input, named


def test_retries_are_checked_where_the_tool_is_declared() -> None:
    from mcp.server.mcpserver import MCPServer

    from mcp_tasks.runtime.serve.server import McpTasks

    tasks = McpTasks(MCPServer("t"))
    with pytest.raises(ValueError, match=r"tool 'a': retries = -1: expected an integer >= 0"):
        tasks.tool("a", on_workers=True, retries=-1)
    with pytest.raises(ValueError, match=r"tool 'b': retries apply to tools on_workers only"):
        tasks.tool("b", retries=2)
    tasks.tool("c", on_workers=True, retries=2)
    assert tasks.tools.on_workers == {"c": 3}


async def test_tools_on_workers_need_the_redis_store() -> None:
    from mcp.server.mcpserver import MCPServer

    from mcp_tasks.runtime.serve.server import McpTasks

    mcp = MCPServer("t")

    @mcp.tool()
    async def far() -> str:
        return "far"

    tasks = McpTasks(mcp)
    tasks.tool("far", on_workers=True)
    with pytest.raises(ValueError, match="on_workers need a RedisTaskStore.*InMemoryTaskStore"):
        async with tasks:
            pass


def test_the_example_server_refuses_on_workers_without_redis(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from mcp_tasks.examples.server import main

    with pytest.raises(SystemExit) as exited:
        main(["--http", "127.0.0.1:1", "--on-workers"])
    assert exited.value.code == 2
    assert "--on-workers needs --store redis://" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--http", "127.0.0.1:1", "--worker-retries", "2", "--store", "redis://h:1/0"])
    assert "--worker-retries applies with --on-workers only" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--store", "redis://h:1/0", "nocolon"], "expected MODULE:ATTR"),
        (["--store", "redis://h:1/0", "no_such_module_x:app"], "cannot import no_such_module_x"),
        (["--store", "redis://h:1/0", "mcp_tasks.protocol:nothing"], "has no attribute nothing"),
        (["--store", "redis://h:1/0", "math:pi"], "got float"),
        (["--store", "memory", "mcp_tasks.examples.server:worker_app"], "expected redis://"),
    ],
)
def test_the_worker_command_names_what_is_wrong(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from mcp_tasks.runtime.worker.run import main

    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert said in capsys.readouterr().err


def test_sigterm_lets_the_tool_finish_and_a_second_one_leaves_it_to_another_worker(
    setup: Setup,
) -> None:
    """The first SIGTERM: the worker takes no new job and the tool it runs finishes (its
    task completes there). The second: the tool stops at once with no outcome stored (the
    task stays ``working``) and the next worker runs it again to its end."""
    first = setup.worker()
    with ExtClient(setup.front.url, headers=ALICE) as alice:
        drained = alice.result("tools/call", _slow(2, "drained"))["taskId"]
        until(lambda: first.runs_of(drained) == 1, 30, what="the worker runs the tool")
        first.stop()  # SIGTERM, then waits for the exit
        assert alice.result("tasks/get", {"taskId": drained})["status"] == "completed"

        second = setup.worker()
        # long enough that the drain and the second SIGTERM land while it runs, on a
        # loaded machine too (4 s was seen finishing first)
        left = alice.result("tools/call", _slow(12, "left"))["taskId"]

        def drain_then_stop(proc: subprocess.Popen[bytes]) -> None:
            proc.send_signal(signal.SIGTERM)
            until(lambda: "taking no more jobs" in second.log(), 30, what="the drain begins")
            proc.send_signal(signal.SIGTERM)

        done = _left_to_the_next_worker(setup, alice, second, left, drain_then_stop)
    assert done["status"] == "completed"
    assert "done after 12s (left)" in str(done["result"])
    assert setup.runs(drained) == 1 and setup.runs(left) == 2


def test_two_stop_signals_at_once_stop_the_tool_and_leave_its_job_to_another_worker(
    setup: Setup,
) -> None:
    """Two stop signals that land together (a second one before the drain began) are two:
    the tool stops at once with no outcome stored, not drained to its end, and its job, left
    pending, runs again to its end on the next worker. (Two cancels of Docket's loop before
    its drain begins count as one there, so the worker cancels its jobs itself.) SIGTERM then
    SIGINT: the kernel may merge two of one kind sent at once into one delivery."""
    with ExtClient(setup.front.url, headers=ALICE) as alice:
        first = setup.worker()
        task_id = alice.result("tools/call", _slow(8, "twice"))["taskId"]

        def both_at_once(proc: subprocess.Popen[bytes]) -> None:
            proc.send_signal(signal.SIGTERM)
            proc.send_signal(signal.SIGINT)

        done = _left_to_the_next_worker(setup, alice, first, task_id, both_at_once)
    assert done["status"] == "completed"
    assert "done after 8s (twice)" in str(done["result"])
    assert setup.runs(task_id) == 2


def _left_to_the_next_worker(
    setup: Setup,
    alice: ExtClient,
    worker: WorkerProc,
    task_id: str,
    stop: Callable[[subprocess.Popen[bytes]], None],
) -> dict[str, Any]:
    """``stop`` the process of ``worker`` while it runs the tool of ``task_id``: the worker
    exits cleanly with the task left ``working`` (no outcome stored), and the next worker runs
    it to its end (the task's final ``tasks/get``)."""
    until(lambda: worker.runs_of(task_id) == 1, 30, what="the worker runs the tool")
    proc = worker.proc
    assert proc is not None
    stop(proc)
    assert proc.wait(timeout=30) == 0, worker.log()
    assert "run ended (completed)" not in worker.log()
    assert alice.result("tasks/get", {"taskId": task_id})["status"] == "working"
    setup.worker()
    return alice.wait(task_id, timeout=60)


# ---------------------------------------------------------------- the README's set-up


def _readme_set_up() -> tuple[str, list[str]]:
    """The README's worker set-up: its app (``reports.py``) and its two commands."""
    readme = (Path(__file__).resolve().parents[2] / "docs" / "workers.md").read_text()
    section = readme.split("# Work on worker processes\n", 1)[1]
    app = section.split("```python\n", 1)[1].split("```", 1)[0]
    commands = section.split("```python\n", 1)[1].split("```", 1)[1]
    shell = commands.split("```\n", 1)[1].split("```", 1)[0]
    return app, [line for line in shell.splitlines() if line.strip()]


async def test_the_readme_set_up_runs_as_written(
    redis_server: RedisServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The README's front end and worker commands, as written but for the Redis address and
    the port: a 2025-11-25 client's task of ``report`` runs on the worker, with progress."""
    import subprocess
    import sys

    from testkit.procs import free_port, python_env, stop_process, wait_listening

    app, (front_cmd, worker_cmd) = _readme_set_up()
    (tmp_path / "reports.py").write_text(app)
    port = free_port()
    here = redis_server.url  # redis://127.0.0.1:PORT/0

    def shell(cmd: str) -> str:
        cmd = cmd.replace("redis://127.0.0.1:6379/0", here)
        return cmd.replace("python ", f"{sys.executable} ", 1).replace(
            " python ", f" {sys.executable} "
        )

    env = dict(python_env(), PORT=str(port))
    logs = [tmp_path / "front.log", tmp_path / "worker.log"]
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for cmd, log in zip((front_cmd, worker_cmd), logs, strict=True):
            with open(log, "ab") as out:
                procs.append(
                    subprocess.Popen(
                        ["bash", "-c", shell(cmd)],  # bash execs a lone command: its PID
                        cwd=tmp_path,
                        env=env,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                    )  # fmt: skip
                )
        wait_listening(procs[0], port, logs[0], 60, "the README's front end")
        until(lambda: "running jobs from" in logs[1].read_text(), 60, what="the README's worker")
        progress: list[types.ProgressNotificationParams] = []

        async def on_message(message: Any) -> None:
            if isinstance(message, types.ProgressNotification):
                progress.append(message.params)

        async with http_session(f"http://127.0.0.1:{port}/mcp", message_handler=on_message) as s:
            created = await s.tasks.call_tool_as_task(
                "report", {"quarter": "Q3"}, progress_token="r"
            )
            result = await s.tasks.tool_result(created.task.taskId)
            await until_async(lambda: len(progress) == 4, 30, what="the report's progress")
        assert text_of(result) == "report for Q3"
        assert f"task {created.task.taskId}: running report" in logs[1].read_text()
    finally:
        for proc in procs:
            stop_process(proc)
