"""Two example-server processes sharing one Redis.

Both run ``--stateless --tokens FILE --store redis://...`` so one bearer token is one
requestor on either instance: create through A, poll and ``tasks/result`` through B,
cancel through A; A killed with SIGKILL mid-task (its task becomes ``failed`` after
the lease, the others are unaffected); Redis stopped and restarted under a server.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from mcp_tasks.core import models
from testkit.ext_wire import ExtClient
from testkit.mcp_e2e import HttpServer, cancel_while_result_held, http_session, redis_store
from testkit.redis_fixtures import (  # noqa: F401
    RedisServer,
    fresh_redis_server,
    redis_server,
    unique_namespace,
)
from testkit.wait import until, until_async

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.slow,
    pytest.mark.door_agnostic,
]  # instances sharing a store: the door is not what is tested (testkit.doors)


def _text(result: dict[str, Any]) -> str:
    return str(result["content"][0]["text"])


TwoServers = Callable[..., tuple[HttpServer, HttpServer]]


@pytest.fixture
def two_servers(redis_example_server: Callable[..., HttpServer]) -> TwoServers:
    """``two_servers(*extra_args)``: example servers A and B on one Redis namespace of their
    own and one token file, so one bearer token is one requestor on both."""

    def make(*extra: str) -> tuple[HttpServer, HttpServer]:
        ns = unique_namespace()
        return redis_example_server(ns, *extra), redis_example_server(ns, *extra)

    return make


async def _until(task_status: Any, want: set[str], timeout: float = 90) -> models.Task:
    """``await task_status()`` once the task's status is in ``want``."""
    task: models.Task = await until_async(
        task_status, timeout, satisfied=lambda t: t.status.value in want, interval=0.1
    )
    return task


async def test_create_on_a_result_on_b_cancel_on_a(two_servers: TwoServers) -> None:
    a, b = two_servers("--stateless")
    async with (
        http_session(a.url, token="tok-alice") as sa,
        http_session(b.url, token="tok-alice") as sb,
        http_session(b.url, token="tok-bob") as bob,
    ):
        created = await sa.tasks.call_tool_as_task("slow_compute", {"seconds": 1, "label": "x"})
        tid = created.task.taskId
        first = await sb.tasks.get(tid)  # B knows A's task at once
        assert first.status in (models.TaskStatus.working, models.TaskStatus.completed)
        with anyio.fail_after(120):
            result = await sb.tasks.result(tid)  # waits on B, woken when A finishes
        assert _text(result) == "done after 1s (x)"
        assert result["_meta"]["io.modelcontextprotocol/related-task"]["taskId"] == tid
        assert (await sa.tasks.get(tid)).status == models.TaskStatus.completed

        # another requestor sees nothing, on either instance (R-SEC-1)
        with pytest.raises(MCPError) as err:
            await bob.tasks.get(tid)
        assert err.value.code == -32602

        # cancel through A while B holds tasks/result: B answers the cancellation
        long = await cancel_while_result_held(sa, sb, sa)
        assert (await sb.tasks.get(long)).status == models.TaskStatus.cancelled

        # listing through either instance: both tasks, nothing lost
        ids_a = {t.taskId for t in await sa.tasks.list_all()}
        ids_b = {t.taskId for t in await sb.tasks.list_all()}
        assert ids_a == ids_b == {tid, long}


async def test_input_required_created_on_a_answered_through_b(two_servers: TwoServers) -> None:
    # Stateful HTTP here: the SDK's stateless mode has no back-channel for the server's
    # elicitation request. Tasks are still bound to the token's subject on both instances.
    a, b = two_servers()
    asked: list[Any] = []

    async def on_elicit(ctx: Any, params: Any) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"confirm": True})

    async with (
        http_session(a.url, token="tok-alice") as sa,
        http_session(b.url, token="tok-alice", elicitation_callback=on_elicit) as sb,
    ):
        tid = (await sa.tasks.call_tool_as_task("confirm_delete", {"path": "/x"})).task.taskId
        await _until(lambda: sb.tasks.get(tid), {"input_required"})
        with anyio.fail_after(120):
            result = await sb.tasks.result(tid)
        assert _text(result) == "deleted /x"
        assert len(asked) == 1
        assert (await sa.tasks.get(tid)).status == models.TaskStatus.completed


async def test_extension_face_across_instances(two_servers: TwoServers) -> None:
    """The tasks extension's face on a shared store: a task created through A is read,
    answered (``tasks/update``) and cancelled through B, and the answered key is gone from
    B's very next ``tasks/get`` (read-your-writes across instances, A-10); another
    requestor's request for it is answered like an unknown id (X-SEC-2)."""
    a, b = two_servers("--stateless")
    alice = {"Authorization": "Bearer tok-alice"}
    with (
        ExtClient(a.url, headers=alice) as ea,
        ExtClient(b.url, headers=alice) as eb,
        ExtClient(b.url, headers={"Authorization": "Bearer tok-bob"}) as bob,
    ):
        call = {"name": "confirm_delete", "arguments": {"filename": "r.txt"}}
        tid = ea.result("tools/call", call)["taskId"]
        asking = eb.wait(tid, until=frozenset({"input_required"}), timeout=60)
        assert asking["status"] == "input_required", asking
        (key,) = asking["inputRequests"]
        answer = {"action": "accept", "content": {"confirm": True}}
        ack = eb.result("tasks/update", {"taskId": tid, "inputResponses": {key: answer}})
        assert ack.get("resultType") == "complete" and "taskId" not in ack
        after = eb.result("tasks/get", {"taskId": tid})
        assert key not in after.get("inputRequests", {})
        done = ea.wait(tid, timeout=60)
        assert done["status"] == "completed" and _text(done["result"]) == "deleted r.txt"
        unknown = bob.send("tasks/get", {"taskId": "no-such-task"})["error"]
        assert bob.send("tasks/get", {"taskId": tid})["error"] == unknown

        slow = ea.result("tools/call", {"name": "slow_compute", "arguments": {"seconds": 120}})
        assert eb.result("tasks/cancel", {"taskId": slow["taskId"]}).get("resultType") == "complete"
        assert ea.wait(slow["taskId"], timeout=60)["status"] == "cancelled"


async def test_sigkill_mid_task_fails_after_lease_others_unaffected(
    two_servers: TwoServers,
) -> None:
    a, b = two_servers("--stateless")
    async with (
        http_session(a.url, token="tok-alice") as sa,
        http_session(b.url, token="tok-alice") as sb,
    ):
        on_a = (await sa.tasks.call_tool_as_task("slow_compute", {"seconds": 300})).task.taskId
        done_on_a = (await sa.tasks.call_tool_as_task("slow_compute", {"seconds": 0})).task.taskId
        await _until(lambda: sb.tasks.get(done_on_a), {"completed"})
        on_b = (await sb.tasks.call_tool_as_task("slow_compute", {"seconds": 3})).task.taskId
    assert a.proc is not None
    os.kill(a.proc.pid, signal.SIGKILL)
    a.proc.wait(timeout=30)
    a.proc = None
    async with http_session(b.url, token="tok-alice") as sb:
        failed = await _until(lambda: sb.tasks.get(on_a), {"failed", "completed", "cancelled"})
        assert failed.status == models.TaskStatus.failed
        assert failed.statusMessage is not None and "lease expired" in failed.statusMessage
        with pytest.raises(MCPError) as err:
            await sb.tasks.result(on_a)
        assert err.value.code == -32603
        with anyio.fail_after(120):
            assert _text(await sb.tasks.result(on_b)) == "done after 3s (no label)"
        assert _text(await sb.tasks.result(done_on_a)) == "done after 0s (no label)"


async def test_redis_restart_clear_errors_then_normal(
    http_server_factory: Any,
    tokens_file: Path,
    fresh_redis_server: RedisServer,  # noqa: F811
) -> None:
    store = redis_store(fresh_redis_server.url, unique_namespace())
    server = http_server_factory("--stateless", "--tokens", str(tokens_file), "--store", store)
    async with http_session(server.url, token="tok-alice") as s:
        running = (await s.tasks.call_tool_as_task("slow_compute", {"seconds": 2})).task.taskId
        fresh_redis_server.stop()
        # non-task requests keep working
        greeting = await s.call_tool("greet", {"name": "R"})
        assert greeting.content[0].text == "Hello, R!"  # type: ignore[union-attr]
        for call in (
            lambda: s.tasks.get(running),
            lambda: s.tasks.call_tool_as_task("slow_compute", {"seconds": 0}),
            lambda: s.tasks.list(),
            lambda: s.tasks.result(running),  # R-RESULT-2's wait needs the store first
            lambda: s.tasks.cancel(running),
        ):
            with anyio.fail_after(60), pytest.raises(MCPError) as err:
                await call()
            assert err.value.code == -32603
            assert "Task store unavailable" in err.value.error.message
        # the running task ends while Redis is down: its outcome is kept to be written
        # again, and the server says so in its log (and stays up)
        until(
            lambda: f"task {running}: the store did not take its outcome" in server.log(),
            what="the running task ends while Redis is down",
        )
        fresh_redis_server.start()
        # served normally again, with no restart of the server (Redis kept no data)
        created = await until_async(
            lambda: s.tasks.call_tool_as_task("slow_compute", {"seconds": 0}),
            ignoring=(MCPError,),  # the store is not reconnected yet
            interval=0.2,
            what="a task is created again",
        )
        with anyio.fail_after(60):
            assert _text(await s.tasks.result(created.task.taskId)) == "done after 0s (no label)"
