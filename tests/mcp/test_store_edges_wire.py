"""Edges of the store, on the wire of the example server (SQLite and Redis): text UTF-8
cannot carry (a lone surrogate, ``"\\ud800"``, which JSON can) in a task ID or a tool's
result, and a ttl shorter than the work.

- A task ID with a lone surrogate is unknown: ``-32602`` (R-ERR-1, X-GET-8, X-CAN-4),
  never "Task store unavailable", and no store failure in the server's log.
- A tool result carrying one completes its task, and comes back exactly (X-GET-9).
- ``task: {"ttl": 1500}`` on a 3 s job: the ttl is granted as asked (R-TTL-2), the work
  is not ended by it, the result is there, the actual ttl reported grows (R-TTL-2)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

from testkit.example_server import HttpServer
from testkit.outage_runs import AUTH, TOKENS, CoreClient, example_server
from testkit.procs import running
from testkit.redis_fixtures import RedisServer
from testkit.wait import until

LONE = "\ud800"
META = "io.modelcontextprotocol/"
TERMINAL = {"completed", "failed", "cancelled"}


@pytest.fixture(params=["sqlite", "redis"])
def server(request: pytest.FixtureRequest, tmp_path: Path, front_door: str) -> Iterator[HttpServer]:
    """The example server on a store of this test's own, behind ``front_door``."""
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps(TOKENS))
    with ExitStack() as stack:
        if request.param == "sqlite":
            store = f"sqlite:{tmp_path / 'tasks.db'}"
        else:
            redis = stack.enter_context(running(RedisServer(tmp_path / "redis")))
            store = f"{redis.url}?namespace=edges"
        yield stack.enter_context(running(example_server(store, tokens, tmp_path, front_door)))


def log_of(server: HttpServer) -> str:
    return server.log()


def ext(url: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """One 2026-07-28 request carrying any text: the body JSON-escaped (as every JSON
    encoder may), the ``Mcp-Name`` header Base64-encoded (X-HTTP-3)."""
    caps = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
    params = {
        **params,
        "_meta": {
            f"{META}protocolVersion": "2026-07-28",
            f"{META}clientInfo": {"name": "edges", "version": "0"},
            f"{META}clientCapabilities": caps,
        },
    }
    head = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": method,
        **AUTH,
    }
    name = params.get("taskId", params.get("name"))
    if isinstance(name, str):
        raw = name.encode("utf-8", "surrogatepass")
        head["Mcp-Name"] = f"=?base64?{base64.b64encode(raw).decode()}?="
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    answer: dict[str, Any] = httpx.post(url, content=body.encode(), headers=head, timeout=60).json()
    return answer


def wait_ext(url: str, task_id: str) -> dict[str, Any]:
    """The extension's ``tasks/get`` of ``task_id`` once terminal."""
    got: dict[str, Any] = until(
        lambda: ext(url, "tasks/get", {"taskId": task_id})["result"],
        satisfied=lambda g: g["status"] in TERMINAL,
        what=f"task {task_id} ends",
    )
    return got


def test_task_id_with_a_lone_surrogate_is_invalid_params_R_ERR_1_X_GET_8(
    server: HttpServer,
) -> None:
    for method in ("tasks/get", "tasks/cancel"):
        err = ext(server.url, method, {"taskId": f"ab{LONE}"})["error"]
        # unknown (the id cannot be stored), or refused before: the Mcp-Name header that
        # must carry it cannot be decoded to that text (X-HTTP-3), so it cannot match it
        assert err in (
            {"code": -32602, "message": "Failed to retrieve task: Task not found"},
            {
                "code": -32020,
                "message": "Header mismatch: the Mcp-Name header does not match params.taskId",
            },
        ), err
    core = CoreClient(server.url)
    try:
        for method in ("tasks/get", "tasks/result", "tasks/cancel"):
            err = core.send(method, {"taskId": f"ab{LONE}"})["error"]
            assert err["code"] in (-32602, -32700), err  # unknown, or refused as it is read
    finally:
        core.close()
    assert "task store failed" not in log_of(server)
    assert "Task store unavailable" not in log_of(server)


def test_tool_result_with_a_lone_surrogate_comes_back_exactly_X_GET_9(server: HttpServer) -> None:
    label = f"x{LONE}y"
    call = {"name": "slow_compute", "arguments": {"seconds": 0, "label": label}}
    tid = ext(server.url, "tools/call", call)["result"]["taskId"]
    got = wait_ext(server.url, tid)
    assert got["status"] == "completed", got
    assert got["result"]["content"][0]["text"] == f"done after 0s ({label})"
    assert "could not" not in log_of(server)


def test_ttl_shorter_than_the_work_does_not_end_it_R_TTL_2_R_TTL_3(server: HttpServer) -> None:
    core = CoreClient(server.url)
    try:
        args = {"seconds": 3, "label": "short ttl"}
        created = core.send(
            "tools/call", {"name": "slow_compute", "arguments": args, "task": {"ttl": 1500}}
        )["result"]["task"]
        assert created["ttl"] == 1500  # granted as asked, and said so (R-TTL-2)
        answer = core.send("tasks/result", {"taskId": created["taskId"]})
        assert answer["result"]["content"][0]["text"] == "done after 3s (short ttl)", answer
        seen = core.send("tasks/get", {"taskId": created["taskId"]})
        if "result" in seen:  # kept its ttl after its end: it may be gone by now
            assert seen["result"]["ttl"] > 3000  # the actual ttl, renewed (R-TTL-2)
        else:
            assert seen["error"]["message"] == "Failed to retrieve task: Task has expired"
    finally:
        core.close()


def test_every_task_path_says_store_unavailable_in_an_outage_R_ERR_1(
    tmp_path: Path, front_door: str
) -> None:
    """Redis down: every task request of both faces answers exactly ``-32603`` "Task store
    unavailable" (the cause goes to the log), a ``tasks/result`` of the 2025-11-25 face too
    (R-ERR-1); a tool call that is no task is served. Once Redis is back the running task
    completes with its own result (its outcome was kept)."""
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps(TOKENS))
    unavailable = {"code": -32603, "message": "Task store unavailable"}
    with ExitStack() as stack:
        redis = stack.enter_context(running(RedisServer(tmp_path / "redis", persist=True)))
        store = f"{redis.url}?namespace=paths"
        srv = stack.enter_context(running(example_server(store, tokens, tmp_path, front_door)))
        core = CoreClient(srv.url)
        stack.callback(core.close)
        call = {"name": "slow_compute", "arguments": {"seconds": 2, "label": "kept"}}
        tid = core.send("tools/call", {**call, "task": {}})["result"]["task"]["taskId"]
        redis.stop()
        greet = core.send("tools/call", {"name": "greet", "arguments": {"name": "R"}})
        assert greet["result"]["content"][0]["text"] == "Hello, R!"
        for method, params in (
            ("tools/call", {**call, "task": {}}),
            ("tasks/get", {"taskId": tid}),
            ("tasks/result", {"taskId": tid}),
            ("tasks/list", {}),
            ("tasks/cancel", {"taskId": tid}),
        ):
            assert core.send(method, params).get("error") == unavailable, method
        for method, params in (
            ("tools/call", call),
            ("tasks/get", {"taskId": tid}),
            ("tasks/update", {"taskId": tid, "inputResponses": {"k": {"action": "cancel"}}}),
            ("tasks/cancel", {"taskId": tid}),
        ):
            assert ext(srv.url, method, params).get("error") == unavailable, method
        until(lambda: f"task {tid}: the store did not take its outcome" in srv.log())
        redis.start()
        answer = until(
            lambda: core.send("tasks/result", {"taskId": tid}),
            satisfied=lambda a: "result" in a,
            what="the kept outcome is stored",
        )
        assert answer["result"]["content"][0]["text"] == "done after 2s (kept)"
