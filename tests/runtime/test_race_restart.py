"""The 1,000-task cancel/complete race and the SIGKILL restart test (SqliteTaskStore)."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_tasks.core.handlers import RequestContext
from mcp_tasks.errors import TaskAlreadyTerminal, TaskError
from mcp_tasks.runtime import EngineConfig, SqliteTaskStore, TaskContext, TaskEngine
from testkit.core_calls import create_task, handle
from testkit.engine_kit import store_maker
from testkit.procs import python_env
from testkit.wait import until_async

pytestmark = pytest.mark.anyio
CTX = RequestContext(requestor="racer")


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_cancel_complete_race_1000_R_CANCEL_2_R_CANCEL_3_R_STATE_3(
    kind: str, tmp_path: Path
) -> None:
    """1,000 tasks, each cancelled at the moment its work completes: no exception
    escapes, each ends in exactly one terminal status, and every task whose cancel
    returned successfully is ``cancelled`` (its completion came too late)."""
    n = 1000
    make = store_maker(kind, tmp_path)
    config = EngineConfig(
        max_active_per_requestor=n, rate_limit_calls=10 * n, sweep_interval_s=3600
    )
    go = anyio.Event()
    cancel_ok: dict[str, bool] = {}
    unexpected: list[BaseException] = []

    rng = random.Random(1234)
    delays: dict[str, tuple[int, int]] = {}

    async def checkpoints(k: int) -> None:
        """The race's handicap: ``k`` scheduler turns (and, for SQLite, real time)."""
        if kind == "sqlite":  # store calls hop to a thread: jitter in real time
            await anyio.sleep(k * 0.02)
        for _ in range(k):
            await anyio.sleep(0)

    async def work(tc: TaskContext) -> dict[str, Any]:
        await go.wait()
        await checkpoints(delays[tc.task_id][0])
        return {"content": [{"type": "text", "text": tc.task_id}]}

    async with TaskEngine(make(), config) as eng:
        ids = [
            (await create_task(eng, CTX, "tools/call", work))["task"]["taskId"] for _ in range(n)
        ]
        # each pair (work, cancel) reaches the finish line after a random number of
        # scheduler turns, so either may win
        delays.update({tid: (rng.randrange(4), rng.randrange(4)) for tid in ids})

        at_the_line: list[str] = []

        async def cancel(tid: str) -> None:
            at_the_line.append(tid)
            await go.wait()
            await checkpoints(delays[tid][1])
            try:
                await handle(eng, "tasks/cancel", {"taskId": tid}, CTX)
                cancel_ok[tid] = True
            except TaskAlreadyTerminal:
                cancel_ok[tid] = False
            except BaseException as exc:  # pragma: no cover - the test fails on it
                unexpected.append(exc)
                raise

        async with anyio.create_task_group() as tg:
            for tid in ids:
                tg.start_soon(cancel, tid)
            await until_async(lambda: len(at_the_line) == n, what="every cancel at the line")
            go.set()
        await until_async(lambda: not eng.running, what="every run ended")
        assert not unexpected
        counts = {"cancelled": 0, "completed": 0}
        for tid in ids:
            t = await handle(eng, "tasks/get", {"taskId": tid}, CTX)
            assert t["status"] in counts
            counts[t["status"]] += 1
            if cancel_ok[tid]:
                assert t["status"] == "cancelled"
                with pytest.raises(TaskError):
                    await handle(eng, "tasks/result", {"taskId": tid}, CTX)
            else:
                assert t["status"] == "completed"
                res = await handle(eng, "tasks/result", {"taskId": tid}, CTX)
                assert res["content"][0]["text"] == tid
        if kind == "memory":  # both outcomes happen (deterministic scheduling)
            assert counts["cancelled"] and counts["completed"], counts
        assert sum(counts.values()) == n
    await eng.store.close()


CHILD = textwrap.dedent("""
    import json, sys, anyio
    from mcp_tasks.core.handlers import RequestContext
    from mcp_tasks.runtime import CoreTasks, EngineConfig, SqliteTaskStore, TaskEngine
    from testkit.wait import until_async

    async def main(path):
        ctx = RequestContext(requestor="alice")
        async with TaskEngine(SqliteTaskStore(path), EngineConfig(cursor_secret=b"k" * 32)) as eng:
            core, done = CoreTasks(eng), {}
            for i in range(3):
                async def work(tc, i=i):
                    return {"content": [{"type": "text", "text": f"result {i} \\u00e9"}], "n": i}
                tid = (await core.dispatch_augmented("tools/call", {"task": {}}, ctx, work=work))["task"]["taskId"]
                done[tid] = await core.dispatch("tasks/result", {"taskId": tid}, ctx)
            async def hang(tc):
                await anyio.sleep_forever()
            hung = (await core.dispatch_augmented("tools/call", {"task": {}}, ctx, work=hang))["task"]["taskId"]
            asking_started = anyio.Event()
            async def ask(tc):
                asking_started.set()
                return await tc.request_input("elicitation/create", {"message": "?"})
            asking = (await core.dispatch_augmented("tools/call", {"task": {}}, ctx, work=ask))["task"]["taskId"]
            await asking_started.wait()
            await until_async(
                lambda: core.dispatch("tasks/get", {"taskId": asking}, ctx),
                satisfied=lambda t: t["status"] == "input_required",
            )
            print(json.dumps({"done": done, "hung": hung, "asking": asking}), flush=True)
            await anyio.sleep_forever()

    anyio.run(main, sys.argv[1])
    """)


async def test_sigkill_restart_sqlite(tmp_path: Path) -> None:
    """Kill a SqliteTaskStore process mid-task with SIGKILL, start again: completed
    results come back exactly; the interrupted tasks are ``failed`` with a message."""
    db = tmp_path / "tasks.db"
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=python_env(),  # testkit on its PYTHONPATH
    )
    try:
        assert proc.stdout is not None
        with anyio.fail_after(30):
            line = await anyio.to_thread.run_sync(proc.stdout.readline)
        assert line, proc.stderr.read() if proc.stderr else ""
        state = json.loads(line)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    ctx = RequestContext(requestor="alice")
    async with TaskEngine(SqliteTaskStore(db), EngineConfig(cursor_secret=b"k" * 32)) as eng:
        for tid, result in state["done"].items():
            assert await handle(eng, "tasks/result", {"taskId": tid}, ctx) == result
            assert (await handle(eng, "tasks/get", {"taskId": tid}, ctx))["status"] == "completed"
        for tid in (state["hung"], state["asking"]):
            t = await handle(eng, "tasks/get", {"taskId": tid}, ctx)
            assert t["status"] == "failed" and "stopped" in t["statusMessage"]
            with pytest.raises(TaskError) as info:
                await handle(eng, "tasks/result", {"taskId": tid}, ctx)
            assert info.value.code == -32603
        listed = await handle(eng, "tasks/list", {}, ctx)
        assert len(listed["tasks"]) == 5
    await eng.store.close()
