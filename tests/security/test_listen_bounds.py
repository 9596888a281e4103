"""``subscriptions/listen`` (the tasks extension's notifications) is bounded, and never drops
a task in silence (R-SEC-3, X-NOTIF-3, X-NOTIF-5).

Against the example server as a real subprocess on loopback, default limits:

- a listen naming 450,000 unknown task ids (a 3.9 MB body, no token) is refused at once,
  before its body is parsed, and another client's ``server/discover`` is answered meanwhile
  as fast as ever (before: answered after 5.6 s, the event loop blocked throughout);
- a listen naming more than ``LISTEN_MAX_IDS`` ids is refused naming the bound; one naming
  that many unknown ids is acknowledged with none, each unknown id a lookup;
- a listen on the client's own 100 tasks, under the default rate limit, gets a terminal
  notification for every one of them and ends only after the last (before: ended at 6 s,
  every task last told ``working``: its follow-up reads were counted against the
  requestor's rate limit and a refused read was taken for the task's end).

And in-process: a follow-up read that fails for a reason other than the task being gone
(the store unavailable) is made again, and the terminal notification still comes.
"""

from __future__ import annotations

import json
import os
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from mcp_tasks.errors import StoreUnavailable
from mcp_tasks.protocol import FAILED
from mcp_tasks.runtime.faces import EXTENSION
from mcp_tasks.runtime.serve.router import LISTEN_MAX_IDS, LISTEN_MAX_TASKS
from testkit.ext_wire import META, REVISION, TASKS_EXTENSION, ExtClient
from testkit.sec_harness import HttpServer
from testkit.wait import until

LISTEN = "subscriptions/listen"
ACK = "notifications/subscriptions/acknowledged"
#: a listen, its body sent whole, must be answered within this (acceptance bound)
LISTEN_ANSWERED_S = 0.1
#: another client's request meanwhile must be answered within this (acceptance bound)
OTHER_ANSWERED_S = 0.05
TASK_NOTE = "notifications/tasks"
TERMINAL = {"completed", "failed", "cancelled"}
#: a request's ``_meta`` envelope declaring the tasks extension (X-CAP-9)
ENVELOPE = {
    f"{META}protocolVersion": REVISION,
    f"{META}clientInfo": {"name": "listen-bounds", "version": "0"},
    f"{META}clientCapabilities": {"extensions": {TASKS_EXTENSION: {}}},
}


def _listen_request(client: ExtClient, ids: list[str]) -> tuple[bytes, dict[str, str]]:
    """A listen's body (compact JSON, as a client would send it) and headers."""
    _, body, headers = client._request(LISTEN, {"notifications": {"taskIds": ids}}, True, None)
    return json.dumps(body, separators=(",", ":")).encode(), headers


class Other:
    """Another client asking ``server/discover`` over and over, on a thread, until closed:
    when each request began and how long it waited."""

    def __init__(self, url: str) -> None:
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._ask, args=(url,))
        self._thread.start()

    def _ask(self, url: str) -> None:
        with ExtClient(url, timeout=30, local_address="127.0.0.3") as other:
            while not self._stop.is_set():
                start = time.perf_counter()
                assert "result" in other.send("server/discover")
                self.samples.append((start, time.perf_counter() - start))
                time.sleep(0.002)

    def longest_wait(self, start: float, end: float) -> float:
        """The longest wait of a request that overlapped ``start``..``end``, once one that
        began after ``end`` has been answered."""
        until(lambda: any(at > end for at, _ in self.samples), 30, what="another answer")
        return max(wait for at, wait in self.samples if at < end and at + wait > start)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def _round(
    url: str, attacker: ExtClient, body: bytes, headers: dict[str, str], other: Other
) -> tuple[float, float]:
    """Five such listens one after another: the longest a listen took, and the longest the
    other client waited meanwhile."""
    began = time.perf_counter()
    took = []
    for _ in range(5):
        start = time.perf_counter()
        answer = attacker.http.post(url, content=body, headers=headers)
        took.append(time.perf_counter() - start)
        error = answer.json()["error"]
        assert error["code"] == -32602, error
        assert f"at most {LISTEN_MAX_IDS} task ids" in error["message"], error
    return max(took), other.longest_wait(began, time.perf_counter())


@pytest.mark.door_agnostic  # the default door, the one that refuses the body unparsed
def test_a_listen_of_450000_unknown_ids_is_refused_at_once_others_served(
    server_factory: Callable[..., HttpServer],
) -> None:
    """R-SEC-3: a 3.9 MB listen naming 450,000 ids, five times over, is answered ``-32602``
    naming the bound in under 100 ms each, and ``server/discover`` from another address
    meanwhile in under 50 ms each, in one round of up to ten (a machine busy with other work
    may slow any one round; a server that parses or walks the ids fails every round). On a
    machine whose load is over three runnable processes per core nothing can be measured
    in milliseconds: skipped there (the unparsed refusal is held by the test below)."""
    load, cores = os.getloadavg()[0], os.cpu_count() or 1
    if load > 3 * cores:
        pytest.skip(f"load {load:.1f} on {cores} cores: milliseconds cannot be measured")
    server = server_factory()
    ids = [str(i) for i in range(450_000)]
    other = Other(server.url)
    try:
        with ExtClient(server.url, timeout=30, local_address="127.0.0.2") as attacker:
            body, headers = _listen_request(attacker, ids)
            assert len(body) > 3_900_000
            assert "result" in attacker.send("server/discover")  # warm
            until(lambda: other.samples, 30, what="the other client is answered")
            rounds: list[tuple[float, float]] = []
            while len(rounds) < 10 and not any(map(_within_bounds, rounds)):
                rounds.append(_round(server.url, attacker, body, headers, other))
    finally:
        other.close()
    assert any(map(_within_bounds, rounds)), rounds


def _within_bounds(round_: tuple[float, float]) -> bool:
    took, other = round_
    return took < LISTEN_ANSWERED_S and other < OTHER_ANSWERED_S


@pytest.mark.door_agnostic  # the default door, the one that refuses the body unparsed
def test_a_listen_of_450000_unknown_ids_is_refused_unparsed_others_served(
    server_factory: Callable[..., HttpServer],
) -> None:
    """R-SEC-3: a 3.9 MB listen naming 450,000 ids, five times over, is answered ``-32602``
    naming the bound without its body being parsed (the same body cut short, no longer
    JSON, gets the same answer, not a parse error), and ``server/discover`` from another
    address is answered throughout. How long each takes is not asserted: on a shared
    machine its load would decide it."""
    server = server_factory()
    ids = [str(i) for i in range(450_000)]
    other = Other(server.url)
    try:
        with ExtClient(server.url, timeout=30, local_address="127.0.0.2") as attacker:
            body, headers = _listen_request(attacker, ids)
            assert len(body) > 3_900_000
            assert "result" in attacker.send("server/discover")  # warm
            until(lambda: other.samples, 30, what="the other client is answered")
            for sent in (body, body, body, body, body[:-2]):  # the last: not JSON any more
                error = attacker.http.post(server.url, content=sent, headers=headers).json()[
                    "error"
                ]
                assert error["code"] == -32602, error
                assert f"at most {LISTEN_MAX_IDS} task ids" in error["message"], error
            answered = len(other.samples)
            until(lambda: len(other.samples) > answered, 30, what="another answer after")
    finally:
        other.close()


def test_the_ids_a_listen_may_name_are_bounded_and_unknown_ones_cheap(
    server_factory: Callable[..., HttpServer],
) -> None:
    """R-SEC-3, X-NOTIF-3: one id more than ``LISTEN_MAX_IDS`` (a small body) is refused
    ``-32602`` naming the bound; ``LISTEN_MAX_IDS`` unknown ids are acknowledged with none,
    in well under a second, and spend that many of the requestor's rate limit at once."""
    server = server_factory("--rate-limit", f"{LISTEN_MAX_IDS + 5}/60")
    with ExtClient(server.url, timeout=30) as client:
        too_many = [secrets.token_urlsafe(16) for _ in range(LISTEN_MAX_IDS + 1)]
        (answer,) = list(client.stream(LISTEN, {"notifications": {"taskIds": too_many}}))
        assert answer["error"]["code"] == -32602, answer
        assert f"{LISTEN_MAX_IDS + 1} task ids (at most {LISTEN_MAX_IDS})" in str(answer)
        start = time.perf_counter()
        messages = list(client.stream(LISTEN, {"notifications": {"taskIds": too_many[1:]}}))
        took = time.perf_counter() - start
        assert messages[0]["method"] == ACK
        assert messages[0]["params"]["notifications"]["taskIds"] == []
        assert messages[-1]["result"]["resultType"] == "complete"
        assert took < 1.0, took
        # its ids were counted: the next listen of ten ids is over the limit
        (again,) = list(client.stream(LISTEN, {"notifications": {"taskIds": too_many[:10]}}))
        assert again["error"]["code"] == -32000 and "Rate limit" in again["error"]["message"]


def test_a_listen_on_100_tasks_gets_every_terminal_notification(
    server_factory: Callable[..., HttpServer],
) -> None:
    """X-NOTIF-5, R-SEC-3: with the default limits (1,000 calls per 10 s), a listen on the
    requestor's own 100 tasks (each reporting progress 20 times) gets, for every task, a
    notification of its terminal status, and its result comes after the last of them; the
    requestor's rate limit is not spent by the server's reads (a tasks/get after is
    answered)."""
    server = server_factory()
    with ExtClient(server.url, timeout=60) as client:
        call = {"name": "slow_compute", "arguments": {"seconds": 4}}
        ids = [client.result("tools/call", call)["taskId"] for _ in range(LISTEN_MAX_TASKS)]
        ended: dict[str, str] = {}
        last: dict[str, str] = {}
        messages = client.stream(LISTEN, {"notifications": {"taskIds": ids}}, rid="all")
        ack = next(messages)
        assert ack["method"] == ACK and ack["params"]["notifications"]["taskIds"] == ids
        end: dict[str, Any] = {}
        for message in messages:
            if message.get("method") == TASK_NOTE:
                params = message["params"]
                assert params["taskId"] not in ended, "nothing after a terminal notification"
                last[params["taskId"]] = params["status"]
                if params["status"] in TERMINAL:
                    ended[params["taskId"]] = params["status"]
            else:
                end = message
        assert end.get("id") == "all" and end["result"]["resultType"] == "complete", end
        told = {s: sum(1 for v in last.values() if v == s) for s in set(last.values())}
        assert ended == dict.fromkeys(ids, "completed"), told
        assert client.result("tasks/get", {"taskId": ids[0]})["status"] == "completed"


@pytest.mark.anyio
async def test_a_follow_up_read_that_fails_is_made_again() -> None:
    """X-NOTIF-5: while the store does not answer a listen's reads (``StoreUnavailable``)
    the task is read again after a backoff, not taken for ended: its terminal notification
    comes once the store answers."""
    from mcp.server.mcpserver import MCPServer

    from mcp_tasks.runtime.serve import listen as mcp_listen
    from mcp_tasks.runtime.serve.router import TaskRequest
    from mcp_tasks.runtime.serve.server import McpTasks

    mcp = MCPServer("listen-retry")
    tasks = McpTasks(mcp)
    failing = {"reads": 0}
    route = tasks.router.route

    async def flaky(req: TaskRequest) -> Any:
        if req.method == "tasks/get" and failing["reads"] < 3:
            failing["reads"] += 1
            raise StoreUnavailable()
        return await route(req)

    async with tasks:
        gate = anyio.Event()

        async def work(tctx: Any) -> dict[str, Any]:
            await gate.wait()
            return {"content": [], "isError": False}

        rec = await tasks.engine.start("alice", REVISION, "tools/call", work, tool_error=FAILED)
        listen = mcp_listen.TaskListen(
            tasks.serving, None, lambda ctx: ctx, lambda e, m: e, EXTENSION
        )
        params = {"notifications": {"taskIds": [rec.task_id]}, "_meta": ENVELOPE}
        req = TaskRequest(REVISION, LISTEN, params, 1, "alice")
        sent: list[dict[str, Any]] = []

        async def send(method: str, params: dict[str, Any]) -> None:
            sent.append(params)

        tasks.router.route = flaky  # type: ignore[method-assign]
        get = mcp_listen._TaskGet(listen, req)
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(get.follow, rec.task_id, send)
                await anyio.sleep(0.3)
                gate.set()
        assert failing["reads"] == 3
        assert sent and sent[-1]["status"] == "completed", sent
