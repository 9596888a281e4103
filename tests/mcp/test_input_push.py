"""A requestor that only polls ``tasks/get`` gets a core task's input requests on the
stream it keeps open (the HTTP ``GET`` stream, or stdio), outside any request.

R-INPUT-3 (``docs/spec/tasks-2025-11-25.md``) says a requestor SHOULD call
``tasks/result`` on ``input_required``; the same revision's transport lets a server send
requests on any stream the client keeps open, and tells the client to expect them there.
So a ``tasks/get`` that answers ``input_required`` makes the server send the task's
outstanding questions on the connection that asked, when no ``tasks/result`` of the task
waits to carry them (``runtime/serve/input_push.py``). Each question is asked once whatever
path carries it (R-INPUT-2: with the related-task ``_meta``), and a later ``tasks/result``
never asks it again; one left unanswered when the ``GET`` stream closes is asked again on
the ``tasks/result`` stream. Without a stream to carry them nothing is pushed:
``tasks/result`` delivers them, as before.

Every test runs over Streamable HTTP through each front door and over stdio (``connect``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp.client.streamable_http import streamable_http_client

from mcp_tasks.runtime.client.requestor import TasksClientSession
from testkit.example_server import HttpServer
from testkit.mcp_e2e import text_of
from testkit.sec_harness import RawHttp
from testkit.wait import until, until_async

pytestmark = pytest.mark.anyio

WAIT = 60  # seconds; generous for loaded machines, never a timing assertion
RELATED = "io.modelcontextprotocol/related-task"


class Asked:
    """The elicitations one session was asked, answered ``accept`` once ``release`` is set."""

    def __init__(self, *, hold: bool = False) -> None:
        self.questions: list[tuple[str, str]] = []  # (message, related task id)
        self.release = anyio.Event()
        if not hold:
            self.release.set()

    async def __call__(self, ctx: Any, params: Any) -> types.ElicitResult:
        meta = dict(ctx.meta or {})
        self.questions.append((params.message, meta[RELATED]["taskId"]))
        await self.release.wait()
        return types.ElicitResult(action="accept", content={"name": "Ada", "confirm": True})


async def poll_to_end(s: TasksClientSession, task_id: str) -> list[str]:
    """``tasks/get`` at its ``pollInterval`` until terminal, never ``tasks/result``; the
    statuses seen."""
    seen: list[str] = []
    with anyio.fail_after(WAIT):
        while True:
            task = await s.tasks.get(task_id)
            seen.append(task.status.value)
            if task.status.value in ("completed", "failed", "cancelled"):
                return seen
            await anyio.sleep((task.pollInterval or 500) / 1000)


async def test_polling_requestor_is_asked(connect: Any) -> None:
    asked = Asked()
    async with connect(elicitation_callback=asked) as s:
        created = await s.tasks.call_tool_as_task("confirm_delete", {"path": "/tmp/p"})
        tid = created.task.taskId
        seen = await poll_to_end(s, tid)
        # R-INPUT-1: input_required while it waited; the question came without tasks/result
        assert "input_required" in seen and seen[-1] == "completed"
        assert asked.questions == [("Delete /tmp/p?", tid)]  # R-INPUT-2, once
        result = await s.tasks.tool_result(tid)  # R-RESULT-1: the task's own result
        assert text_of(result) == "deleted /tmp/p"
        assert len(asked.questions) == 1  # tasks/result does not ask it again


async def test_several_questions_at_once(connect: Any) -> None:
    asked = Asked()
    async with connect(elicitation_callback=asked) as s:
        tid = (await s.tasks.call_tool_as_task("multi_input", {})).task.taskId
        assert (await poll_to_end(s, tid))[-1] == "completed"
        assert sorted(asked.questions) == [
            ("First: your name, and go ahead?", tid),
            ("Second: your name, and go ahead?", tid),
        ]
        assert text_of(await s.tasks.tool_result(tid)) == "answers: Ada accept, Ada accept"
        assert len(asked.questions) == 2


async def test_result_after_a_push_does_not_ask_again(connect: Any) -> None:
    """The question pushed on a ``tasks/get``, still unanswered when the requestor switches to
    ``tasks/result`` (R-INPUT-3): the answer to the pushed question settles it, the
    ``tasks/result`` waits without asking it again, then answers the result."""
    asked = Asked(hold=True)
    async with connect(elicitation_callback=asked) as s:
        tid = (await s.tasks.call_tool_as_task("confirm_delete", {"path": "/tmp/q"})).task.taskId

        async def pushed() -> bool:
            task = await s.tasks.get(tid)
            return task.status.value == "input_required" and bool(asked.questions)

        await until_async(pushed, timeout=WAIT)
        got: list[types.CallToolResult] = []
        async with anyio.create_task_group() as tg:

            async def result() -> None:
                got.append(await s.tasks.tool_result(tid))

            tg.start_soon(result)
            asked.release.set()
        assert text_of(got[0]) == "deleted /tmp/q"
        assert asked.questions == [("Delete /tmp/q?", tid)]


class _NoGetStream(httpx2.AsyncBaseTransport):
    """An HTTP transport that answers every ``GET`` 405 itself: the client then keeps no
    ``GET`` stream open (the server may not offer one), the rest goes to the server."""

    def __init__(self) -> None:
        self.inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.method == "GET":
            return httpx2.Response(405, request=request)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_no_stream_no_push(request: pytest.FixtureRequest, front_door: str) -> None:
    """An HTTP session with no ``GET`` stream: nothing is pushed (the SDK would drop it);
    the question waits for the requestor's ``tasks/result``, which asks it once."""
    server = request.getfixturevalue("http_server_pool").get(front_door)
    asked = Asked()
    timeout = httpx2.Timeout(60, read=300)
    async with httpx2.AsyncClient(transport=_NoGetStream(), timeout=timeout) as http:
        async with streamable_http_client(server.url, http_client=http) as (read, write):
            async with TasksClientSession(read, write, elicitation_callback=asked) as s:
                await s.initialize()
                tid = (await s.tasks.call_tool_as_task("confirm_delete", {"path": "/n"})).task
                task = await s.tasks.wait(tid.taskId)
                assert task.status.value == "input_required"  # R-INPUT-1
                for _ in range(3):  # polled again: still nobody to push to
                    assert (await s.tasks.get(tid.taskId)).status.value == "input_required"
                assert asked.questions == []
                result = await s.tasks.tool_result(tid.taskId)  # R-INPUT-3
                assert text_of(result) == "deleted /n"
                assert asked.questions == [("Delete /n?", tid.taskId)]


def _sse_messages(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    """The JSON-RPC messages of an SSE body, as its lines arrive."""
    for line in lines:
        if line.startswith("data:") and line[5:].strip():
            yield json.loads(line[5:])


def _is_request(message: dict[str, Any]) -> bool:
    return "method" in message and "id" in message


def test_a_question_left_on_a_closed_get_stream_is_asked_again(http_server: HttpServer) -> None:
    """The question pushed on the ``GET`` stream, which closes before it is answered: the
    push lets it go, and the requestor's ``tasks/result`` asks it on its own stream
    (R-INPUT-3), where the answer settles it (R-INPUT-4) and the result follows."""
    with RawHttp(http_server.url) as peer:
        tid = peer.create("confirm_delete", {"path": "/g"})
        with peer.http.stream("GET", peer.url, headers=peer._headers()) as get:
            assert get.status_code == 200
            status = until(
                lambda: peer.ok("tasks/get", {"taskId": tid})["status"],
                WAIT,
                satisfied=lambda s: s == "input_required",
            )
            assert status == "input_required"  # R-INPUT-1
            pushed = next(m for m in _sse_messages(get.iter_lines()) if _is_request(m))
        # closed, unanswered
        assert pushed["method"] == "elicitation/create"
        assert pushed["params"]["_meta"][RELATED] == {"taskId": tid}  # R-INPUT-2
        request = {"jsonrpc": "2.0", "id": 1, "method": "tasks/result", "params": {"taskId": tid}}
        headers = peer._headers()
        with peer.http.stream("POST", peer.url, headers=headers, json=request) as result:
            messages = _sse_messages(result.iter_lines())
            asked = next(m for m in messages if _is_request(m))
            assert asked["method"] == "elicitation/create"
            assert asked["params"]["message"] == pushed["params"]["message"] == "Delete /g?"
            answer = {"action": "accept", "content": {"confirm": True}}
            reply = peer.post_raw(
                json.dumps({"jsonrpc": "2.0", "id": asked["id"], "result": answer})
            )
            assert reply.status == 202
            final = next(m for m in messages if "method" not in m)
        assert final["id"] == 1
        assert final["result"]["content"] == [{"type": "text", "text": "deleted /g"}]
        assert peer.ok("tasks/get", {"taskId": tid})["status"] == "completed"
