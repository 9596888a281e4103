"""Task notifications on ``subscriptions/listen`` (the extension face), over raw HTTP against
the example server through both front doors, on one instance and across two on one Redis;
and a tool's progress as each face's client sees it, from the same process.

Our own client's use of the stream (``TasksClientExtension`` waking its poll loop on each
notification) is checked by ``tests/interop/test_interop_ext_client.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from testkit.ext_wire import ExtClient
from testkit.mcp_e2e import HttpServer, http_session
from testkit.redis_fixtures import RedisServer, redis_server, unique_namespace  # noqa: F401
from testkit.wait import until_async

LISTEN = "subscriptions/listen"
ACK = "notifications/subscriptions/acknowledged"
TASK_NOTE = "notifications/tasks"
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
ALICE = {"Authorization": "Bearer tok-alice"}
BOB = {"Authorization": "Bearer tok-bob"}
TERMINAL = {"completed", "failed", "cancelled"}


def _slow(seconds: float, label: str) -> dict[str, Any]:
    return {"name": "slow_compute", "arguments": {"seconds": seconds, "label": label}}


def _listen(client: ExtClient, task_ids: list[str], rid: str, **notes: Any) -> list[dict[str, Any]]:
    """Every message of one listen stream, to its end."""
    params = {"notifications": {"taskIds": task_ids, **notes}}
    return list(client.stream(LISTEN, params, rid=rid))


def _without(task: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in task.items() if k not in keys}


@pytest.fixture
def tokened(http_server_factory: Callable[..., HttpServer], tokens_file: Path) -> HttpServer:
    return http_server_factory("--tokens", str(tokens_file))


def test_ack_first_then_each_change_as_tasks_get_answers_it(tokened: HttpServer) -> None:
    """X-NOTIF-2, X-NOTIF-3, X-NOTIF-5, X-NOTIF-7, X-NOTIF-8: the acknowledgement is the first
    message and lists only the requestor's own task (bob's and an unknown id are left out
    alike: X-SEC-1); every notification carries the subscription id and the task as
    ``tasks/get`` answers it, without ``resultType``; no progress or log message, though the
    tool reports progress; the stream ends with the listen's result once the task ended."""
    with ExtClient(tokened.url, headers=ALICE) as alice, ExtClient(tokened.url, headers=BOB) as bob:
        mine = alice.result("tools/call", _slow(1.2, "mine"))["taskId"]
        theirs = bob.result("tools/call", _slow(1.2, "theirs"))["taskId"]
        messages = _listen(alice, [mine, theirs, "no-such-task"], rid="sub-1")
        answered = alice.result("tasks/get", {"taskId": mine})

    ack, *notes, end = messages
    assert ack["method"] == ACK, messages[:2]
    assert ack["params"]["notifications"]["taskIds"] == [mine]
    assert ack["params"]["_meta"][SUBSCRIPTION_ID] == "sub-1"
    assert {m.get("method") for m in notes} == {TASK_NOTE}, "only task notifications"
    assert notes, "at least the terminal notification"
    for note in notes:
        params = note["params"]
        assert params["_meta"][SUBSCRIPTION_ID] == "sub-1"
        assert "resultType" not in params
        assert params["taskId"] == mine
    last = notes[-1]["params"]
    assert last["status"] == "completed"
    assert _without(last, "_meta") == _without(answered, "_meta", "resultType")
    assert all(n["params"]["status"] not in TERMINAL for n in notes[:-1])
    assert end["id"] == "sub-1" and end["result"]["resultType"] == "complete"
    assert end["result"]["_meta"][SUBSCRIPTION_ID] == "sub-1"


def test_asking_for_task_notifications_without_the_extension_is_refused(
    tokened: HttpServer,
) -> None:
    """X-NOTIF-4: ``-32021`` with ``data.requiredCapabilities`` naming the extension."""
    with ExtClient(tokened.url, headers=ALICE) as alice:
        task = alice.result("tools/call", _slow(0, "x"))["taskId"]
        (answer,) = list(
            alice.stream(LISTEN, {"notifications": {"taskIds": [task]}}, rid=7, tasks=False)
        )
    assert answer["id"] == 7
    assert answer["error"]["code"] == -32021, answer
    required = answer["error"]["data"]["requiredCapabilities"]
    assert "io.modelcontextprotocol/tasks" in str(required)


def test_a_listen_of_an_ended_task_acknowledges_and_ends(tokened: HttpServer) -> None:
    """A-20 as the README settles it: a task already terminal gets its one (terminal)
    notification, then the stream ends."""
    with ExtClient(tokened.url, headers=ALICE) as alice:
        task = alice.result("tools/call", _slow(0, "done"))["taskId"]
        alice.wait(task)
        ack, *notes, end = _listen(alice, [task], rid="sub-2")
    assert ack["params"]["notifications"]["taskIds"] == [task]
    assert [n["params"]["status"] for n in notes] == ["completed"]
    assert end["result"]["resultType"] == "complete"


def test_listening_to_no_task_of_ones_own_acknowledges_none(tokened: HttpServer) -> None:
    """X-SEC-1: another requestor's task id is acknowledged as an unknown one is: not at all."""
    with ExtClient(tokened.url, headers=ALICE) as alice, ExtClient(tokened.url, headers=BOB) as bob:
        theirs = bob.result("tools/call", _slow(0.5, "theirs"))["taskId"]
        messages = _listen(alice, [theirs], rid="sub-3")
    ack, end = messages
    assert ack["params"]["notifications"]["taskIds"] == []
    assert end["result"]["resultType"] == "complete"


@pytest.mark.anyio
async def test_progress_is_the_status_message_on_the_extension_and_progress_on_2025(
    tokened: HttpServer,
) -> None:
    """The same tool in the same process: on the extension face its ``report_progress``
    calls are the task's ``statusMessage`` (no progress notification: X-NOTIF-7), throttled
    to a few writes; the 2025-11-25 face gets its progress notifications to the token."""
    with ExtClient(tokened.url, headers=ALICE) as alice:
        task = alice.result("tools/call", _slow(1.5, "p"))["taskId"]
        messages = _listen(alice, [task], rid="sub-4")
    said = [m["params"].get("statusMessage") for m in messages if m.get("method") == TASK_NOTE]
    steps = [s for s in said if s and s.startswith("step ")]
    assert steps, said  # e.g. "step 4/15 (27%)"
    assert len(steps) < 15, "throttled: not one write per report"
    assert not [m for m in messages if m.get("method") == "notifications/progress"]

    progress: list[types.ProgressNotificationParams] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ProgressNotification):
            progress.append(message.params)

    async with http_session(tokened.url, token="tok-alice", message_handler=on_message) as s:
        created = await s.tasks.call_tool_as_task(
            "slow_compute", {"seconds": 1}, progress_token="p-1"
        )
        await s.tasks.wait(created.task.taskId)
        await until_async(lambda: len(progress) >= 10, 30, what="every step's progress")
    assert all(p.progress_token == "p-1" for p in progress)  # R-PROGRESS-1


def test_a_task_on_another_instance_notifies_a_listener_here(
    http_server_factory: Callable[..., HttpServer],
    tokens_file: Path,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """X-NOTIF-2 across instances on one shared store: the task runs on A, the listener is on
    B, and B's stream follows it to its end, as B's ``tasks/get`` answers it."""
    store = f"{redis_server.url}?namespace={unique_namespace()}"
    args = ("--stateless", "--tokens", str(tokens_file), "--store", store)
    a, b = http_server_factory(*args), http_server_factory(*args)
    with ExtClient(a.url, headers=ALICE) as on_a, ExtClient(b.url, headers=ALICE) as on_b:
        task = on_a.result("tools/call", _slow(1.5, "far"))["taskId"]
        ack, *notes, end = _listen(on_b, [task], rid="sub-5")
        answered = on_b.result("tasks/get", {"taskId": task})
    assert ack["params"]["notifications"]["taskIds"] == [task]
    assert notes and notes[-1]["params"]["status"] == "completed"
    assert _without(notes[-1]["params"], "_meta") == _without(answered, "_meta", "resultType")
    assert "far" in str(notes[-1]["params"]["result"])
    assert end["result"]["resultType"] == "complete"


def test_task_ids_beside_other_notifications(tokened: HttpServer) -> None:
    """A listen that asks for task ids and another kind: one acknowledgement listing both,
    first; the task's notifications follow on the same stream (X-NOTIF-8)."""
    with ExtClient(tokened.url, headers=ALICE) as alice:
        task = alice.result("tools/call", _slow(0.6, "both"))["taskId"]
        params = {"notifications": {"taskIds": [task], "toolsListChanged": True}}
        stream = alice.stream(LISTEN, params, rid="sub-6")
        ack = next(stream)
        seen = []
        for message in stream:  # the SDK's part of the stream lasts: stop at the terminal one
            seen.append(message)
            if message.get("method") == TASK_NOTE and message["params"]["status"] in TERMINAL:
                break
        stream.close()
    assert ack["method"] == ACK
    assert ack["params"]["notifications"]["taskIds"] == [task]
    assert ack["params"]["notifications"].get("toolsListChanged") is True
    task_notes = [m for m in seen if m.get("method") == TASK_NOTE]
    assert task_notes[-1]["params"]["status"] == "completed"
    assert all(m["params"]["_meta"][SUBSCRIPTION_ID] == "sub-6" for m in task_notes)
