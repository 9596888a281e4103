"""The task endpoint for the task methods (``McpTasks.streamable_http_app``): it answers the task
methods of both faces itself, and leaves every request the SDK would refuse to the SDK, so
refusals are the SDK's own, byte for byte, with or without it.

The server runs in this process (``serving``), so a test can read the task endpoint's own
counters (``answered``, ``passed``). Tests named ``..._sdks_own`` or ``..._answers_...``
send the same requests through both front doors (``serving(SDK)``, ``serving(ENDPOINT)``)
and compare the answers; the others take the ``front_door`` fixture and run through each,
checking the counters only on the door that has them. Every other test of ``tests/mcp``,
``tests/security`` and ``tests/interop`` runs through both doors by its server fixture."""

from __future__ import annotations

import json
import time
from typing import Annotated, Any

import anyio
import httpx
import pytest
from mcp.server.mcpserver import MCPServer
from pydantic import Field

from mcp_tasks.runtime.sdk import http_session, session_manager
from mcp_tasks.runtime.serve.server import McpTasks
from mcp_tasks.testing.store_conformance import record
from testkit.doors import ENDPOINT, SDK
from testkit.ext_wire import ExtClient
from testkit.inproc import serving
from testkit.sec_harness import RawHttp, parse_body
from testkit.wait import until

TOKENS = {"tok-alice": "alice", "tok-bob": "bob"}


def _lifecycle_2025(url: str, token: str | None = None) -> list[Any]:
    """A task's whole life on the 2025-11-25 face; what came back, minus ids and times."""
    with RawHttp(url, token=token) as c:
        task_id = c.create("slow_compute", {"seconds": 0})
        done = c.wait(task_id)
        listed = c.ok("tasks/list")
        result = c.ok("tasks/result", {"taskId": task_id})
        cancel = c.call("tasks/cancel", {"taskId": task_id})
        unknown = c.call("tasks/get", {"taskId": "no-such-task"})
        bad = c.call("tasks/get", {})
    return [
        done["status"],
        len(listed["tasks"]),
        result["content"],
        cancel.get("error"),
        unknown.get("error"),
        bad.get("error"),
    ]


def test_task_endpoint_answers_the_2025_task_methods() -> None:
    """Same answers with and without it; with it, the task methods never reach the SDK."""
    with serving(SDK) as slow:
        expected = _lifecycle_2025(slow.url)
    with serving(ENDPOINT) as fast:
        got = _lifecycle_2025(fast.url)
        assert fast.answered >= 6  # tools/call, tasks/get (>= 1), list, result, cancel, get x2
        assert fast.tasks.task_endpoint.passed >= 2  # initialize, notifications/initialized
    assert got == expected
    assert expected[0] == "completed" and expected[3]["code"] == -32602  # R-CANCEL-1


def _lifecycle_ext(url: str, headers: dict[str, str] | None = None) -> list[Any]:
    with ExtClient(url, headers=headers) as c:
        created = c.result("tools/call", {"name": "slow_compute", "arguments": {"seconds": 0}})
        done = c.wait(created["taskId"])
        cancel = c.send("tasks/cancel", {"taskId": created["taskId"]})
        unknown = c.send("tasks/get", {"taskId": "no-such-task"})
        plain = c.send("tools/call", {"name": "greet", "arguments": {"name": "x"}})
    return [
        created["resultType"],
        done["status"],
        done.get("result", {}).get("content"),
        cancel.get("error", cancel.get("result", {}).get("status")),
        unknown.get("error"),
        plain["result"]["content"],
    ]


def test_task_endpoint_answers_the_extension_task_methods() -> None:
    with serving(SDK) as slow:
        expected = _lifecycle_ext(slow.url)
    with serving(ENDPOINT) as fast:
        got = _lifecycle_ext(fast.url)
        assert fast.answered >= 4  # tools/call (task), tasks/get, tasks/cancel, tasks/get
    assert got == expected
    assert expected[1] == "completed"


def _post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, str, Any]:
    r = httpx.post(url, content=body, headers=headers, timeout=10)
    text = r.text
    try:
        doc: Any = json.loads(text)
    except ValueError:
        doc = text
    return r.status_code, r.headers.get("content-type", ""), doc


def _refusals(url: str, token_of_session: str | None) -> dict[str, Any]:
    """Requests the SDK refuses, each aimed at a task method the task endpoint would serve."""
    get = {"jsonrpc": "2.0", "id": 7, "method": "tasks/get", "params": {"taskId": "x"}}
    body = json.dumps(get).encode()
    with RawHttp(url, token=token_of_session) as c:
        good = c._headers()
        out: dict[str, Any] = {}
        out["unknown session"] = _post(url, body, {**good, "mcp-session-id": "f" * 32})
        out["no session"] = _post(
            url, body, {k: v for k, v in good.items() if k != "mcp-session-id"}
        )
        out["bad accept"] = _post(url, body, {**good, "Accept": "text/plain"})
        out["bad content type"] = _post(url, body, {**good, "Content-Type": "text/plain"})
        out["bad json"] = _post(url, b'{"jsonrpc": "2.0", "id": 7, "method": "tasks/g', good)
        out["not a request"] = _post(url, b'{"jsonrpc": "2.0", "id": 7}', good)
        out["bad host"] = _post(url, body, {**good, "Host": "evil.example:80"})
        out["too big"] = _post(url, json.dumps({**get, "pad": "x" * 5000}).encode(), good)
        if token_of_session is not None:
            other = {**good, "Authorization": "Bearer tok-bob"}
            out["another credential"] = _post(url, body, other)
        httpx.delete(url, headers=good, timeout=10)
        out["deleted session"] = _post(url, body, good)
    return out


@pytest.mark.parametrize("token", [None, "tok-alice"], ids=["sessions", "bearer"])
def test_refusals_are_the_sdks_own(token: str | None) -> None:
    """Every request the SDK refuses is refused the same way with the task endpoint in front."""
    tokens = TOKENS if token else None
    with serving(SDK, tokens=tokens, max_request_body_size=4096) as slow:
        expected = _refusals(slow.url, token)
    with serving(ENDPOINT, tokens=tokens, max_request_body_size=4096) as fast:
        got = _refusals(fast.url, token)
        assert fast.answered == 0
    assert got == expected
    assert expected["unknown session"][0] == 404 and expected["too big"][0] == 413


def test_extension_refusals_are_the_sdks_own() -> None:
    def refusals(url: str) -> list[Any]:
        with ExtClient(url) as c:
            return [
                c.send("tasks/get", {"taskId": "x"}, headers={"Mcp-Method": "tasks/list"}),
                c.send("tools/call", {"name": "slow_compute"}, headers={"Mcp-Name": "greet"}),
                c.send("tasks/get", {"taskId": "x", "_meta": {"x": 1}}, tasks=False),
            ]

    with serving(SDK) as slow:
        expected = refusals(slow.url)
    with serving(ENDPOINT) as fast:
        got = refusals(fast.url)
    assert got == expected
    assert all("error" in answer for answer in expected[:2])


def test_polls_keep_the_session_alive(front_door: str) -> None:
    """A client that only polls holds its session's idle timer, through the task endpoint as
    through the SDK's transport: the session outlives its idle timeout while polled."""
    with serving(front_door, session_idle_timeout=1.0) as fast, RawHttp(fast.url) as c:
        task_id = c.create("slow_compute", {"seconds": 0})
        end = time.monotonic() + 2.5
        while time.monotonic() < end:  # polling for longer than the idle timeout ...
            assert c.ok("tasks/get", {"taskId": task_id})["taskId"] == task_id
            time.sleep(0.3)  # ... at a pace well inside it: the behaviour under test
        # now idle: the SDK ends the session once its timeout passes (watched in process,
        # where a look does not count as activity)
        manager = session_manager(fast.tasks.server)
        assert c.session_id is not None
        until(lambda: http_session(manager, c.session_id, None) is None, what="the idle-out")
        gone = c.post_raw(json.dumps({"jsonrpc": "2.0", "id": 99, "method": "tasks/get"}))
        assert gone.status == 404


def test_a_request_longer_than_the_idle_timeout_keeps_its_session(front_door: str) -> None:
    """A ``tasks/result`` that waits 2.5 s on a session whose idle timeout is 1 s: the
    session is not ended under it (the countdown is held while a request is in flight, on
    both doors) and ends once it has been idle for its timeout after the answer."""
    with serving(front_door, session_idle_timeout=1.0) as fast, RawHttp(fast.url) as c:
        task_id = c.create("slow_compute", {"seconds": 2.5})
        result = c.ok("tasks/result", {"taskId": task_id})
        assert not result.get("isError"), result
        assert c.ok("tasks/get", {"taskId": task_id})["status"] == "completed"  # still open
        manager = session_manager(fast.tasks.server)
        assert c.session_id is not None
        until(lambda: http_session(manager, c.session_id, None) is None, what="the idle-out")


def test_the_sdks_requests_and_the_endpoints_share_one_idle_countdown(front_door: str) -> None:
    """Requests the SDK serves itself (``ping``) and requests the task endpoint serves
    (``tasks/get``), alternating for longer than the idle timeout, each leaving last in turn:
    the session stays; idle, it ends. While only the task endpoint's requests came last, the
    SDK's own countdown is stopped (one timer per session runs it instead)."""
    with serving(front_door, session_idle_timeout=1.0) as fast, RawHttp(fast.url) as c:
        task_id = c.create("slow_compute", {"seconds": 0})
        manager = session_manager(fast.tasks.server)
        assert c.session_id is not None
        transport = http_session(manager, c.session_id, None)
        end = time.monotonic() + 2.5
        while time.monotonic() < end:
            c.ok("ping")
            time.sleep(0.3)
            assert c.ok("tasks/get", {"taskId": task_id})["taskId"] == task_id
            if front_door == ENDPOINT:
                assert transport.idle_scope.deadline == float("inf")
            time.sleep(0.3)
        until(lambda: http_session(manager, c.session_id, None) is None, what="the idle-out")
        gone = c.post_raw(json.dumps({"jsonrpc": "2.0", "id": 99, "method": "tasks/get"}))
        assert gone.status == 404


def test_the_app_stays_a_starlette_app_and_sees_its_own_middleware(front_door: str) -> None:
    """Middleware added to the app afterwards (CORS here) runs for the task requests on both
    doors: the task endpoint's answers too."""
    from starlette.middleware.cors import CORSMiddleware

    def add_cors(app: Any) -> None:
        app.add_middleware(CORSMiddleware, allow_origins=["http://127.0.0.1:1"])
        assert app.routes and app.user_middleware  # the Starlette app's own attributes

    with serving(front_door, prepare=add_cors) as fast, RawHttp(fast.url) as c:
        task_id = c.create("slow_compute", {"seconds": 0})
        r = c.http.post(
            fast.url,
            headers={**c._headers(), "Origin": "http://127.0.0.1:1"},
            json={"jsonrpc": "2.0", "id": 5, "method": "tasks/get", "params": {"taskId": task_id}},
        )
        assert r.headers.get("access-control-allow-origin") == "http://127.0.0.1:1"
        (answer,) = parse_body(r.headers["content-type"], r.text)  # JSON or an event stream
        assert answer["result"]["taskId"] == task_id
        assert fast.answered >= 2 or front_door == SDK


def test_status_notifications_never_hold_ending_tasks_in_line() -> None:
    """R-NOTIFY-1 is a MAY and requestors never rely on it (R-NOTIFY-2): when a connection
    takes notifications slower than tasks end, at most NOTIFY_BACKLOG wait on it and the
    rest are dropped, instead of every ended task's run (and its memory) waiting in line."""
    from mcp_tasks.runtime.serve.sessions import NOTIFY_BACKLOG

    class SlowConnection:
        session_id = "s-1"
        state: dict[str, Any] = {}

        def __init__(self) -> None:
            self.waiting = 0
            self.most = 0

        async def notify(self, method: str, params: Any, opts: Any = None) -> None:
            self.waiting += 1
            self.most = max(self.most, self.waiting)
            try:
                await anyio.sleep(0.2)  # a connection slower than the tasks end
            finally:
                self.waiting -= 1

    async def main() -> tuple[int, int]:
        tasks = McpTasks(MCPServer("t"))
        conn = SlowConnection()
        tasks.sessions.bind("session:s-1", conn)  # type: ignore[arg-type]
        async with anyio.create_task_group() as tg:
            for i in range(50):
                tg.start_soon(tasks.sessions.on_status, record(str(i), "session:s-1"))
        return conn.most, tasks.sessions.notifications_dropped

    most, dropped = anyio.run(main)
    assert most == NOTIFY_BACKLOG
    assert dropped == 50 - NOTIFY_BACKLOG


def test_result_of_a_running_task_is_answered_when_it_ends(front_door: str) -> None:
    """R-RESULT-2: tasks/result of a running task blocks until it ends, on both doors; at the
    task endpoint as one JSON answer (the SDK's pipeline may answer with an event stream)."""
    with serving(front_door) as fast, RawHttp(fast.url) as c:
        task_id = c.create("slow_compute", {"seconds": 0.3})
        before = fast.answered
        r = c.http.post(
            fast.url,
            headers=c._headers(),
            json={
                "jsonrpc": "2.0",
                "id": 9,
                "method": "tasks/result",
                "params": {"taskId": task_id},
            },
        )
        (answer,) = parse_body(r.headers["content-type"], r.text)
        assert answer["result"]["content"][0]["text"].startswith("done after 0.3s")
        if front_door == ENDPOINT:
            assert r.headers["content-type"] == "application/json"
            assert fast.answered == before + 1


def test_a_client_that_leaves_while_its_result_waits_costs_nothing_after(front_door: str) -> None:
    with serving(front_door) as fast, RawHttp(fast.url) as c:
        task_id = c.create("slow_compute", {"seconds": 1.0})
        body = {"jsonrpc": "2.0", "id": 9, "method": "tasks/result", "params": {"taskId": task_id}}
        with pytest.raises(httpx.TimeoutException):
            httpx.post(fast.url, headers=c._headers(), json=body, timeout=0.2)
        assert c.wait(task_id)["status"] == "completed"  # the session and the task go on
        assert c.ok("tasks/result", {"taskId": task_id})["content"]


def _regional() -> tuple[Any, McpTasks]:
    """A server whose tool routes on a header parameter (``x-mcp-header``)."""
    mcp = MCPServer("regional")
    tasks = McpTasks(mcp)

    @tasks.tool(task_support="optional")
    @mcp.tool()
    async def regional(
        region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})],
    ) -> str:
        return f"served in {region}"

    return mcp, tasks


def test_mcp_param_headers_are_checked_on_both_paths() -> None:
    """The SDK's Mcp-Param header check (2026-07-28) holds for task calls the task endpoint
    makes: a header that disagrees with the argument is refused the SDK's way."""

    def calls(url: str) -> list[Any]:
        with ExtClient(url) as c:
            args = {"name": "regional", "arguments": {"region": "eu"}}
            bad = c.send("tools/call", args, headers={"Mcp-Param-Region": "us"})
            missing = c.send("tools/call", args)
            good = c.send("tools/call", args, headers={"Mcp-Param-Region": "eu"})
            return [bad, missing, good["result"]["resultType"]]

    with serving(SDK, build=_regional) as slow:
        expected = calls(slow.url)
    with serving(ENDPOINT, build=_regional) as fast:
        got = calls(fast.url)
        assert fast.answered == 1  # the good one; the refusals are the SDK's
    assert got == expected
    assert "error" in expected[0] and "error" in expected[1] and expected[2] == "task"


def _counted(runs: list[str]) -> Any:
    """``build()``: a server whose one tool counts its runs in ``runs``."""

    def build() -> tuple[Any, McpTasks]:
        mcp = MCPServer("counted")
        tasks = McpTasks(mcp)

        @tasks.tool(task_support="optional")
        @mcp.tool()
        async def count(label: str) -> str:
            runs.append(label)
            return f"counted {label}"

        return mcp, tasks

    return build


def test_a_task_call_that_fails_after_it_was_routed_runs_once_R_CREATE_2(front_door: str) -> None:
    """A task-augmented ``tools/call`` whose answer fails after the router created its task
    (a fault injected between the router and the reply): the requestor gets one JSON-RPC
    internal error, and there is exactly one task and one run of the tool, on both doors and
    both faces; the request is never handed on to be run again."""
    runs: list[str] = []
    with serving(front_door, build=_counted(runs)) as srv:
        router = srv.tasks.router
        route = router.route

        async def faulty(req: Any) -> Any:
            routed = await route(req)
            if req.method == "tools/call":
                raise RuntimeError("injected: the answer failed after routing")
            return routed

        router.route = faulty  # type: ignore[method-assign]
        call = {"name": "count", "arguments": {"label": "core"}, "task": {}}
        with RawHttp(srv.url) as c:
            answer = c.call("tools/call", call)
            assert answer["error"]["code"] == -32603, answer
        with ExtClient(srv.url) as ext:
            made = ext.send("tools/call", {"name": "count", "arguments": {"label": "ext"}})
            assert made["error"]["code"] == -32603, made
        until(lambda: len(runs) >= 2, 10, what="both runs")
        time.sleep(0.3)  # a second run of either would have started by now
        assert sorted(runs) == ["core", "ext"]
        assert len(srv.tasks.engine.store) == 2  # one task each  # type: ignore[arg-type]


def test_a_tasks_tool_runs_once_through_the_whole_pipeline_on_both_doors_R_CREATE_2(
    front_door: str,
) -> None:
    """The tool of a task-augmented ``tools/call`` runs once, by the one runner both doors
    use: through the server's whole request pipeline (a middleware of the server's own sees
    the run, once, marked as a task's run), on both faces; the task middleware lets that run
    by instead of making a second task of it."""
    from mcp_tasks.runtime.sdk import lowlevel_server
    from mcp_tasks.runtime.serve.tool_runner import IN_TASK

    runs: list[str] = []
    seen: list[tuple[str, bool]] = []  # (label, a task's run) per tools/call seen

    def build() -> tuple[Any, McpTasks]:
        mcp, tasks = _counted(runs)()

        async def watch(ctx: Any, call_next: Any) -> Any:
            if ctx.method == "tools/call":
                arguments = (ctx.params or {}).get("arguments") or {}
                seen.append((str(arguments.get("label")), IN_TASK.get()))
            return await call_next(ctx)

        lowlevel_server(mcp).middleware.insert(0, watch)  # outermost, before the tasks'
        return mcp, tasks

    with serving(front_door, build=build) as srv:
        with RawHttp(srv.url) as c:
            made = c.call(
                "tools/call", {"name": "count", "arguments": {"label": "core"}, "task": {}}
            )
            assert "task" in made["result"], made
        with ExtClient(srv.url) as ext:
            made = ext.send("tools/call", {"name": "count", "arguments": {"label": "ext"}})
            assert made["result"]["resultType"] == "task", made
        until(lambda: len(runs) >= 2, 10, what="both runs")
        until(lambda: sum(in_task for _, in_task in seen) >= 2, 10, what="both runs seen")
        time.sleep(0.3)  # a second run of either would have started by now
        assert sorted(runs) == ["core", "ext"]
        assert sorted(label for label, in_task in seen if in_task) == ["core", "ext"]
        assert len(srv.tasks.engine.store) == 2  # type: ignore[arg-type]


def _result_stream(
    c: RawHttp, task_id: str, answer: Any, forger: RawHttp | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]], list[int]]:
    """``tasks/result`` of ``task_id`` read as a stream: each input request on it answered
    by POSTing ``answer(request)`` (after ``forger`` POSTed ``{"action": "decline"}`` to
    the same id from its own session); the answer, the requests, the POSTs' statuses."""
    msg = {"jsonrpc": "2.0", "id": 9, "method": "tasks/result", "params": {"taskId": task_id}}
    asked: list[dict[str, Any]] = []
    statuses: list[int] = []
    with c.http.stream("POST", c.url, headers=c._headers(), json=msg) as r:
        assert r.headers["content-type"].startswith("text/event-stream"), r.headers
        for line in r.iter_lines():
            if not line.startswith("data:"):
                continue
            doc = json.loads(line[5:])
            if "method" in doc:  # an input request, its answer POSTed while this one waits
                asked.append(doc)
                for who, result in ((forger, {"action": "decline"}), (c, answer(doc))):
                    if who is not None:
                        body = {"jsonrpc": "2.0", "id": doc["id"], "result": result}
                        statuses.append(
                            who.http.post(c.url, headers=who._headers(), json=body).status_code
                        )
            elif doc.get("id") == 9:
                return doc, asked, statuses
    raise AssertionError(f"the stream ended without an answer; asked {asked}")


def _confirm(_: dict[str, Any]) -> dict[str, Any]:
    return {"action": "accept", "content": {"confirm": True}}


def test_input_rides_the_result_stream_and_is_answered_there_R_INPUT_3(front_door: str) -> None:
    """R-INPUT-3, R-INPUT-2: a ``tasks/result`` whose task asks for input carries the input
    request on its own stream (with the related-task ``_meta``); the requestor's POSTed answer
    reaches the task, which then ends with it. At the task endpoint every one of those
    requests is answered there: nothing is handed to the SDK's path."""
    with serving(front_door) as srv, RawHttp(srv.url) as c:
        task_id = c.create("multi_input", {})
        passed = srv.tasks.task_endpoint.passed if front_door == ENDPOINT else 0
        answer, asked, statuses = _result_stream(c, task_id, _confirm)
        assert len(asked) == 2 and {q["method"] for q in asked} == {"elicitation/create"}
        for q in asked:
            related = q["params"]["_meta"]["io.modelcontextprotocol/related-task"]
            assert related == {"taskId": task_id}, q
        assert statuses == [202, 202]
        assert "result" in answer and not answer["result"].get("isError"), answer
        assert c.wait(task_id)["status"] == "completed"
        if front_door == ENDPOINT:
            assert srv.tasks.task_endpoint.passed == passed
            assert not srv.tasks.task_endpoint.answers  # nothing left awaiting an answer


def test_another_sessions_answer_to_an_input_request_is_not_taken_R_SEC_1(
    front_door: str,
) -> None:
    """R-SEC-1: an answer to a task's input request POSTed from another session (its id
    copied) does not reach the task: only the requestor's own answer does."""
    with serving(front_door) as srv, RawHttp(srv.url) as alice, RawHttp(srv.url) as mallory:
        task_id = alice.create("confirm_delete", {"path": "/tmp/x"})
        answer, asked, _ = _result_stream(alice, task_id, _confirm, forger=mallory)
        assert len(asked) == 1
        assert answer["result"]["content"][0]["text"] == "deleted /tmp/x", answer


def test_a_result_that_waits_long_streams_and_ends_with_its_session(
    front_door: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``tasks/result`` that waits past ``STREAM_AFTER_S`` answers on a stream (the
    headers go out, nothing in between takes it for dead) and still ends with the result;
    one whose session is deleted meanwhile ends without one, as the SDK ends a terminated
    session's streams. At the task endpoint neither goes to the SDK's path."""
    from mcp_tasks.runtime.serve import endpoint as task_endpoint

    monkeypatch.setattr(task_endpoint, "STREAM_AFTER_S", 0.2)
    with serving(front_door) as srv:
        endpoint = srv.tasks.task_endpoint

        def passed() -> int:
            return endpoint.passed if endpoint is not None else 0

        with RawHttp(srv.url) as c:
            task_id = c.create("slow_compute", {"seconds": 1.5})
            before = passed()
            answer, asked, _ = _result_stream(c, task_id, _confirm)
            assert not asked and passed() == before
            assert answer["result"]["content"][0]["text"].startswith("done after 1.5s")
        c = RawHttp(srv.url).initialize()
        task_id = c.create("slow_compute", {"seconds": 30})
        msg = {"jsonrpc": "2.0", "id": 9, "method": "tasks/result", "params": {"taskId": task_id}}
        before = passed()
        with c.http.stream("POST", c.url, headers=c._headers(), json=msg) as r:
            assert r.headers["content-type"].startswith("text/event-stream")
            assert passed() == before
            assert c.http.delete(c.url, headers=c._headers()).status_code == 200
            started = time.monotonic()
            rest = b"".join(r.iter_bytes())
        assert b"result" not in rest and time.monotonic() - started < 10
        c.session_id = None
        c.close()


def test_input_rides_the_result_stream_on_stateless_http_R_INPUT_3() -> None:
    """R-INPUT-3 without a session (stateless HTTP, where the SDK's own transport cannot
    take the answer back): the input request rides the ``tasks/result`` stream at the task
    endpoint, and the answer POSTed without a session reaches the task by its id."""
    with serving(ENDPOINT, stateless_http=True) as srv, RawHttp(srv.url, stateless=True) as c:
        task_id = c.create("confirm_delete", {"path": "/tmp/y"})
        answer, asked, statuses = _result_stream(c, task_id, _confirm)
        assert len(asked) == 1 and statuses == [202]
        assert answer["result"]["content"][0]["text"] == "deleted /tmp/y", answer


def test_results_go_to_the_sdk_as_they_arrive_where_answers_cannot_stream_here() -> None:
    """A server that answers JSON only (``json_response=True``) has no stream for a
    ``tasks/result`` to carry input requests on here: the task endpoint leaves every
    ``tasks/result`` to the SDK's path as it arrives, before the router sees it, and the
    other task methods stay its own."""
    with serving(ENDPOINT, json_response=True) as srv, RawHttp(srv.url) as c:
        endpoint = srv.tasks.task_endpoint
        task_id = c.create("slow_compute", {"seconds": 0})
        c.wait(task_id)
        answered, passed = endpoint.replied, endpoint.passed
        result = c.ok("tasks/result", {"taskId": task_id})
        assert result["content"][0]["text"].startswith("done after 0")
        assert (endpoint.replied, endpoint.passed) == (answered, passed + 1)
        c.ok("tasks/get", {"taskId": task_id})
        assert (endpoint.replied, endpoint.passed) == (answered + 1, passed + 1)
