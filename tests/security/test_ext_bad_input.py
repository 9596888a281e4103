"""Bad input on the tasks extension's face (2026-07-28).

Each bad request gets a JSON-RPC error that names the problem (the field, the header, the
method), nothing is lost (the task that was asked about is unchanged) and the server keeps
serving both faces. Another requestor's task id is answered exactly like an unknown one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx

from mcp_tasks.runtime.faces.extension import MAX_INPUT_RESPONSES
from testkit.ext_wire import ExtClient
from testkit.sec_harness import HttpServer, RawHttp, error_of
from testkit.wait import until

ASKING = frozenset({"input_required"})


def _names(err: dict[str, Any], *words: str) -> None:
    for word in words:
        assert word.lower() in err["message"].lower(), (word, err)


def _bad_envelopes_fail_the_gate(ext: ExtClient, tid: str) -> None:
    """A malformed ``_meta`` envelope: a capability set that is no object is "not declared"
    (X-CAP-1), and the gate comes before the params (X-CAP-9): -32021 with data."""
    for caps in (7, {"extensions": 7}, {"extensions": {"io.modelcontextprotocol/tasks": 1}}):
        meta = {"io.modelcontextprotocol/clientCapabilities": caps}
        err = error_of(ext.send("tasks/get", {"taskId": tid, "_meta": meta}))
        assert err["code"] == -32021 and "requiredCapabilities" in err["data"], err
    err = error_of(ext.send("tasks/update", {"taskId": 5, "inputResponses": []}, tasks=False))
    assert err["code"] == -32021, err


def _wrong_types_name_the_field(ext: ExtClient, tid: str) -> None:
    """Wrong types: -32602 naming the field."""
    err = error_of(ext.send("tasks/get", {"taskId": 123}))
    assert err["code"] == -32602 and "params.taskId" in err["message"], err
    err = error_of(ext.send("tasks/update", {"taskId": tid, "inputResponses": []}))
    assert err["code"] == -32602 and "params.inputResponses" in err["message"], err
    err = error_of(ext.send("tasks/cancel", {}))
    assert err["code"] == -32602 and "params.taskId" in err["message"], err


def _bad_answers_leave_the_request_open(ext: ExtClient, tid: str, key: str) -> None:
    """An outstanding key with a value that answers nothing: named, the key stays listed;
    oversized ``inputResponses``: refused, named, nothing answered."""
    bad = {key: {"action": "maybe"}}
    err = error_of(ext.send("tasks/update", {"taskId": tid, "inputResponses": bad}))
    assert err["code"] == -32602 and f"params.inputResponses.{key}" in err["message"], err
    assert key in ext.result("tasks/get", {"taskId": tid})["inputRequests"]

    many: dict[str, Any] = {f"k{i}": {"action": "accept"} for i in range(MAX_INPUT_RESPONSES + 1)}
    many[key] = {"action": "accept", "content": {"confirm": True}}
    err = error_of(ext.send("tasks/update", {"taskId": tid, "inputResponses": many}))
    assert err["code"] == -32602 and "params.inputResponses" in err["message"], err
    assert ext.result("tasks/get", {"taskId": tid})["status"] == "input_required"


def _unknown_methods_and_headers_are_named(ext: ExtClient, tid: str) -> None:
    """Unknown and removed methods: -32601 naming the method (X-COMPAT-4); a routing header
    that disagrees with the body: -32020 naming the header (X-HTTP-4)."""
    for method in ("tasks/frobnicate", "tasks/result", "tasks/list"):
        err = error_of(ext.send(method, {"taskId": tid}))
        assert err["code"] == -32601, (method, err)
    _names(error_of(ext.send("tasks/result", {"taskId": tid})), "tasks/result")

    err = error_of(ext.send("tasks/get", {"taskId": tid}, headers={"Mcp-Name": "other"}))
    assert err["code"] == -32020, err
    _names(err, "Mcp-Name")


def _the_untouched_task_completes(ext: ExtClient, tid: str, key: str) -> None:
    """The task was not touched by any of it: answer it, it completes; then tasks/update on
    the terminal task is refused, naming its status, and cancel stays an ack."""
    good = {key: {"action": "accept", "content": {"confirm": True}}}
    ext.result("tasks/update", {"taskId": tid, "inputResponses": good})
    done = ext.wait(tid)
    assert done["status"] == "completed", done
    assert done["result"]["content"][0]["text"] == "deleted keep.txt"

    err = error_of(ext.send("tasks/update", {"taskId": tid, "inputResponses": good}))
    assert err["code"] == -32602, err
    _names(err, "completed")
    assert ext.result("tasks/cancel", {"taskId": tid}).get("resultType") == "complete"
    assert ext.result("tasks/update", {"taskId": tid, "inputResponses": {}})


def _no_envelope_is_refused_before_dispatch(url: str, tid: str) -> None:
    """No ``_meta`` envelope at all: the SDK refuses the request before dispatch."""
    raw = {"jsonrpc": "2.0", "id": 99, "method": "tasks/get", "params": {"taskId": tid}}
    r = httpx.post(
        url,
        content=json.dumps(raw),
        headers={
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tasks/get",
        },
        timeout=30,
    )
    assert r.status_code == 400 and "_meta" in r.text, r.text


def _both_faces_still_served(server: HttpServer) -> None:
    assert server.alive(), server.log()[-3000:]
    with ExtClient(server.url) as again:
        created = again.result("tools/call", {"name": "slow_compute", "arguments": {"seconds": 0}})
        assert again.wait(created["taskId"])["status"] == "completed"
    with RawHttp(server.url).initialize() as core:
        assert core.ok("tools/call", {"name": "greet", "arguments": {"name": "x"}})


def test_bad_input_is_named_and_nothing_is_lost(
    server_factory: Callable[..., HttpServer],
) -> None:
    server = server_factory()
    with ExtClient(server.url) as ext:
        call = {"name": "confirm_delete", "arguments": {"filename": "keep.txt"}}
        tid = ext.result("tools/call", call)["taskId"]
        asking = ext.wait(tid, until=ASKING)
        (key,) = asking["inputRequests"]

        _bad_envelopes_fail_the_gate(ext, tid)
        _wrong_types_name_the_field(ext, tid)
        _bad_answers_leave_the_request_open(ext, tid, key)
        _unknown_methods_and_headers_are_named(ext, tid)
        _the_untouched_task_completes(ext, tid, key)
        _no_envelope_is_refused_before_dispatch(server.url, tid)

    _both_faces_still_served(server)


def test_expired_and_unknown_tasks_are_invalid_params(
    server_factory: Callable[..., HttpServer],
) -> None:
    """X-GET-8, R-TTL-3: an unknown or expired task id answers -32602 on every ``tasks/*``
    request of the extension's face; the capability gate still comes first (X-CAP-9)."""
    server = server_factory("--default-ttl", "300")
    with ExtClient(server.url) as ext:
        created = ext.result("tools/call", {"name": "slow_compute", "arguments": {"seconds": 0}})
        assert created["ttlMs"] == 300
        tid = created["taskId"]
        answer = until(
            lambda: ext.send("tasks/get", {"taskId": tid}),
            satisfied=lambda answer: "error" in answer,
            interval=0.1,
            what=f"task {tid} expired",
        )
        expired = answer["error"]
        assert expired["code"] == -32602 and "expired" in expired["message"].lower(), expired
        for method in ("tasks/get", "tasks/update", "tasks/cancel"):
            params: dict[str, Any] = {"taskId": "no-such-task", "inputResponses": {}}
            err = error_of(ext.send(method, params))
            assert err["code"] == -32602 and "not found" in err["message"].lower(), (method, err)
            assert error_of(ext.send(method, params, tasks=False))["code"] == -32021
