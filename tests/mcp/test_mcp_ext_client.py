"""The tasks extension's poll loop (``ExtTaskRequestor.wait``) on scripted ``tasks/get``
answers: what no server we test against shows (neither ours nor FastMCP 4 sends
``notifications/tasks``; both keep an answered key out of the next poll)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import anyio
import pytest

from mcp_tasks.extension import methods as ext_methods
from mcp_tasks.extension import protocol as ext
from mcp_tasks.runtime.client.extension import ExtTaskRequestor, TasksClientExtension
from mcp_tasks.runtime.client.retry import poll_delay

pytestmark = pytest.mark.anyio

STAMP = "2026-12-01T00:00:00Z"
ASK = {
    "method": "elicitation/create",
    "params": {
        "mode": "form",
        "message": "ok?",
        "requestedSchema": {"type": "object", "properties": {}},
    },
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def task(status: str, poll_ms: int, **extra: Any) -> ext.GetTaskResult:
    raw = {
        "resultType": ext.RESULT_TYPE_COMPLETE,
        "taskId": "t-1",
        "status": status,
        "createdAt": STAMP,
        "lastUpdatedAt": STAMP,
        "ttlMs": None,
        "pollIntervalMs": poll_ms,
        **extra,
    }
    parsed: ext.GetTaskResult = ext_methods.RESULTS[ext.TASKS_GET](raw)
    return parsed


class Scripted(ExtTaskRequestor):
    """``tasks/get`` answers from a script; ``tasks/update`` and the callbacks recorded."""

    def __init__(self, script: list[ext.GetTaskResult]) -> None:
        super().__init__(cast(Any, None), default_poll_ms=10)
        self.script = script
        self.updates: list[dict[str, Any]] = []

    async def get(self, task_id: str) -> ext.GetTaskResult:
        return self.script.pop(0)

    async def update(self, task_id: str, responses: Mapping[str, Any]) -> ext.UpdateTaskResult:
        self.updates.append(dict(responses))
        return ext.UpdateTaskResult(resultType=ext.RESULT_TYPE_COMPLETE)

    async def _answer(self, requests: Mapping[str, Any]) -> dict[str, Any]:
        return {key: {"action": "accept"} for key in requests}


async def test_a_notification_wakes_the_poll_early() -> None:
    """X-NOTIF-1, X-NOTIF-6: a poll sleeping a long ``pollIntervalMs`` (X-POLL-2) polls
    again as soon as ``notifications/tasks`` names the task; it never waits for one."""
    extension = TasksClientExtension()
    (binding,) = extension.notifications()
    assert binding.method == ext.NOTIFICATIONS_TASKS
    done = task(ext.COMPLETED, 600_000, result={"content": []})
    requestor = Scripted([done])
    requestor.wakeups = extension.wakeups
    with anyio.fail_after(30):  # a guard: the poll interval is ten minutes
        async with anyio.create_task_group() as tg:
            results: list[Any] = []

            async def waiting() -> None:
                results.append(await requestor.wait("t-1", first=task(ext.WORKING, 600_000)))

            tg.start_soon(waiting)
            await anyio.wait_all_tasks_blocked()
            notice = binding.params_type.model_validate(
                {"taskId": "t-1", "status": ext.COMPLETED.value}
            )
            await binding.handler(notice)
    assert results[0].status == ext.COMPLETED
    assert extension.wakeups.notices[0]["taskId"] == "t-1"


async def test_each_input_request_is_answered_once() -> None:
    """X-UPD-4: a key still listed on the next poll (the ack is eventually consistent,
    X-UPD-10) is not answered twice; a new key is; X-UPD-2: through tasks/update."""
    asking = {"a": ASK}
    script = [
        task(ext.INPUT_REQUIRED, 10, inputRequests=asking),
        task(ext.INPUT_REQUIRED, 10, inputRequests={**asking, "b": ASK}),
        task(ext.WORKING, 10),
        task(ext.COMPLETED, 10, result={"content": []}),
    ]
    requestor = Scripted(script)
    with anyio.fail_after(30):
        done = await requestor.wait("t-1", first=task(ext.WORKING, 10))
    assert done.status == ext.COMPLETED
    assert requestor.updates == [{"a": {"action": "accept"}}, {"b": {"action": "accept"}}]


async def test_answer_inputs_false_stops_at_input_required() -> None:
    requestor = Scripted([task(ext.INPUT_REQUIRED, 10, inputRequests={"a": ASK})])
    got = await requestor.wait("t-1", first=task(ext.WORKING, 10), answer_inputs=False)
    assert got.status == ext.INPUT_REQUIRED and requestor.updates == []


def test_a_poll_never_comes_sooner_than_asked_and_is_jittered_R_GET_1_X_POLL_2() -> None:
    """Both requestors (and the server polling a client's task) sleep ``poll_delay``: the
    asked interval, never less, plus 2-10%; the default when none is asked; 10 ms at least.
    The jitter keeps a 5000 ms poll off the instant uvicorn's 5 s keep-alive closes the
    idle connection (a request sent on it fails, and ends the stock client's session)."""
    delays = [poll_delay(5000, 500) for _ in range(2000)]
    assert all(5.1 <= d <= 5.5 for d in delays)
    assert len({round(d, 3) for d in delays}) > 100  # spread, not one fixed offset
    assert all(0.51 <= poll_delay(None, 500) <= 0.55 for _ in range(100))
    assert all(0.0102 <= poll_delay(0, 500) <= 0.011 for _ in range(100))
