"""One example server process, one store, both faces: 2025-11-25 sessions and stateless
2026-07-28 requests of the tasks extension create tasks in the same store, under the same
limits, each face serving only its own tasks.

The server runs with ``--tokens`` so one bearer token is one requestor on both faces
(without auth a 2025-11-25 requestor is its session and a 2026-07-28 one the client's address),
and with ``--store sqlite:PATH`` so the test can read the one store behind both.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from mcp.shared.exceptions import MCPError

from mcp_tasks.runtime.faces.core import FACE as CORE_FACE
from mcp_tasks.runtime.faces.extension import FACE as EXT_FACE
from mcp_tasks.runtime.stores.sqlite import SqliteTaskStore
from testkit.ext_wire import ExtClient
from testkit.mcp_e2e import HttpServer, http_session

pytestmark = pytest.mark.anyio

ALICE = {"Authorization": "Bearer tok-alice"}
BOB = {"Authorization": "Bearer tok-bob"}
SLOW = {"name": "slow_compute", "arguments": {"seconds": 60}}


async def test_both_faces_share_one_store_and_its_limits(
    http_server_factory: Callable[..., HttpServer], tokens_file: Path, tmp_path: Path
) -> None:
    db = tmp_path / "tasks.db"
    server = http_server_factory(
        "--tokens", str(tokens_file), "--store", f"sqlite:{db}", "--max-active", "3"
    )
    with ExtClient(server.url) as ext:
        async with http_session(server.url, token="tok-alice") as s:
            core_ids = [
                (await s.tasks.call_tool_as_task("slow_compute", {"seconds": 60})).task.taskId
                for _ in range(2)
            ]
            ext_id = ext.result("tools/call", SLOW, headers=ALICE)["taskId"]

            # R-SEC-3: the active-task limit counts the tasks of both faces
            over = ext.send("tools/call", SLOW, headers=ALICE)
            assert over["error"]["code"] == -32000, over
            assert "active" in over["error"]["message"].lower()
            with pytest.raises(MCPError) as core_over:
                await s.tasks.call_tool_as_task("slow_compute", {"seconds": 60})
            assert core_over.value.code == -32000
            # another requestor has a limit of its own
            bob_id = ext.result("tools/call", SLOW, headers=BOB)["taskId"]

            # both live in the one store, each marked with the face that created it
            store = SqliteTaskStore(str(db))
            try:
                mine = await store.list_tasks("subject:alice", after=None, limit=100)
            finally:
                await store.close()
            assert {(r.task_id, r.face) for r in mine} == {
                (core_ids[0], CORE_FACE),
                (core_ids[1], CORE_FACE),
                (ext_id, EXT_FACE),
            }

            # each face serves its own tasks; another face's task is answered like an
            # unknown one (X-SEC-2, R-SEC-1)
            listed = {t.taskId for t in await s.tasks.list_all()}
            assert listed == set(core_ids)
            assert ext.result("tasks/get", {"taskId": ext_id}, headers=ALICE)["status"] == "working"
            unknown = ext.send("tasks/get", {"taskId": "no-such-task"}, headers=ALICE)["error"]
            cross = ext.send("tasks/get", {"taskId": core_ids[0]}, headers=ALICE)["error"]
            assert cross == unknown and cross["code"] == -32602
            with pytest.raises(MCPError) as core_cross:
                await s.tasks.get(ext_id)
            assert core_cross.value.code == -32602

            # cancelling through one face frees a slot for the other (X-CAN-8: an ack)
            ack = ext.result("tasks/cancel", {"taskId": ext_id}, headers=ALICE)
            assert ack.get("resultType") == "complete" and "taskId" not in ack
            again = await s.tasks.call_tool_as_task("slow_compute", {"seconds": 60})
            for tid in [*core_ids, again.task.taskId]:
                await s.tasks.cancel(tid)
        ext.result("tasks/cancel", {"taskId": bob_id}, headers=BOB)


async def test_extension_tasks_without_auth_are_anonymous(
    http_server_factory: Callable[..., HttpServer],
) -> None:
    """Without auth the 2026-07-28 face has no session to bind a task to: a task is the
    anonymous requestor's of the client's address, and there its unguessable id is the
    capability (X-SEC-1); a 2025-11-25 session never sees them."""
    server = http_server_factory()
    with ExtClient(server.url) as a, ExtClient(server.url) as b:
        tid = a.result("tools/call", {"name": "slow_compute", "arguments": {"seconds": 0}})[
            "taskId"
        ]
        assert b.wait(tid)["status"] == "completed"
        async with http_session(server.url) as s:
            with pytest.raises(MCPError) as err:
                await s.tasks.get(tid)
            assert err.value.code == -32602
            assert tid not in {t.taskId for t in await s.tasks.list_all()}


async def test_core_list_pages_are_full_beside_extension_tasks_R_LIST_1(
    http_server_factory: Callable[..., HttpServer], tokens_file: Path
) -> None:
    """One requestor with tasks of both faces: each 2025-11-25 ``tasks/list`` page is full
    until the last, and lists each of its tasks once, however the extension's tasks lie
    between them."""
    size, quick = 3, {"name": "slow_compute", "arguments": {"seconds": 0}}
    server = http_server_factory(
        "--tokens", str(tokens_file), "--page-size", str(size), "--max-active", "100"
    )
    with ExtClient(server.url) as ext:
        async with http_session(server.url, token="tok-alice") as s:
            core: list[str] = []
            for i in range(7):
                for _ in range(4 if i % 2 == 0 else 1):
                    ext.result("tools/call", quick, headers=ALICE)
                created = await s.tasks.call_tool_as_task("slow_compute", {"seconds": 0})
                core.append(created.task.taskId)
            pages: list[list[str]] = []
            cursor: str | None = None
            while True:
                page = await s.tasks.list(cursor)
                pages.append([t.taskId for t in page.tasks])
                cursor = page.nextCursor
                if not cursor:
                    break
    assert all(len(p) == size for p in pages[:-1]) and 0 < len(pages[-1]) <= size, pages
    assert [tid for p in pages for tid in p] == core


async def test_an_unknown_tool_called_as_a_task_is_unknown_on_both_faces(
    http_server: HttpServer,
) -> None:
    """R-TOOL-2 refuses task augmentation of a tool that exists and forbids it; a tool that
    does not exist answers as the server answers any call of an unknown tool, on each face
    (X-CAP-5: on the extension's a call the server cannot make a task is a plain call)."""
    from mcp_tasks.runtime.client.requestor import raw_request

    unknown = {"content": [{"type": "text", "text": "Unknown tool: nosuch"}], "isError": True}
    async with http_session(http_server.url) as s:
        call = {"name": "nosuch", "arguments": {}, "task": {}}
        assert await raw_request(s, "tools/call", call) == unknown
        with pytest.raises(MCPError) as forbidden:  # a tool that exists: R-TOOL-2 as before
            await raw_request(s, "tools/call", {"name": "greet", "arguments": {}, "task": {}})
        assert forbidden.value.code == -32601 and "greet" in forbidden.value.message
    with ExtClient(http_server.url) as ext:
        answer = ext.result("tools/call", {"name": "nosuch", "arguments": {}})
        assert answer["resultType"] == "complete"
        assert {k: answer[k] for k in unknown} == unknown


async def test_every_extension_tasks_get_answer_is_complete_X_GET_5(
    http_server: HttpServer,
) -> None:
    """X-GET-5, X-RT-3: the extension's ``tasks/get`` answers ``resultType: "complete"``
    whatever the task's status (working, completed, failed, cancelled), over a real server
    through each front door; the ``tasks/cancel`` ack is that, with no task fields (X-CAN-3);
    only the create answer says ``"task"`` (X-RT-1, X-RT-2)."""
    with ExtClient(http_server.url) as ext:
        running = ext.result("tools/call", SLOW)
        done = ext.result("tools/call", {"name": "slow_compute", "arguments": {"seconds": 0}})
        failed = ext.result("tools/call", {"name": "protocol_error_job", "arguments": {}})
        assert {running["resultType"], done["resultType"], failed["resultType"]} == {"task"}
        answers = {"working": ext.result("tasks/get", {"taskId": running["taskId"]})}
        answers["completed"] = ext.wait(done["taskId"])
        answers["failed"] = ext.wait(failed["taskId"])
        ack = ext.result("tasks/cancel", {"taskId": running["taskId"]})
        assert ack["resultType"] == "complete" and set(ack) <= {"resultType", "_meta"}, ack
        answers["cancelled"] = ext.wait(running["taskId"])
    for status, answer in answers.items():
        assert answer["status"] == status, answer
        assert answer["resultType"] == "complete", answer
    assert answers["completed"]["result"]["content"][0]["text"].startswith("done after 0s")
