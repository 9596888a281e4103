"""TypeScript SDK 1.32.2 client -> our example server.

``ts_client.mjs`` (the SDK's experimental task API) runs one scenario and prints what it
observed as JSON; each test checks that against the spec rules
(``docs/spec/tasks-2025-11-25.md``), over Streamable HTTP and over stdio.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

from testkit.doors import door_of, http_targets
from testkit.interop import EXAMPLE_TASK_SUPPORT, SERVER_MODULE, HttpServer, run_node

pytestmark = pytest.mark.usefixtures("node_modules")

RELATED = "io.modelcontextprotocol/related-task"


@pytest.fixture(params=http_targets("stdio"))
def ts_client(request: pytest.FixtureRequest) -> Any:
    """``ts_client(scenario)`` -> the Node client's JSON, against HTTP (through each front
    door) or a stdio subprocess."""
    door = door_of(request.param)
    if door is not None:
        server: HttpServer = request.getfixturevalue("http_server_pool").get(door)
        target = [server.url]
    else:
        target = ["stdio", sys.executable, "-m", SERVER_MODULE, "--stdio"]

    def run(scenario: str) -> dict[str, Any]:
        out = run_node("ts_client.mjs", scenario, *target)
        assert out["_rc"] == 0 and "fatal" not in out, out
        return out

    return run


def text(result: dict[str, Any]) -> str:
    return str(result["content"][0]["text"])


def test_tools_and_task_support(ts_client: Any) -> None:
    out = ts_client("tools")
    assert out["protocolVersion"] in (None, "2025-11-25")
    # R-CAP-1, R-CAP-2: the SDK parses our tasks capability
    assert out["serverCapabilities"]["tasks"] == {
        "list": {},
        "cancel": {},
        "requests": {"tools": {"call": {}}},
    }
    assert out["tools"] == EXAMPLE_TASK_SUPPORT
    assert text(out["greet"]) == "Hello, Ada!"
    # R-TOOL-4: a required tool called without a task -> -32601 from our server
    assert out["requiredWithoutTask"]["error"]["code"] == -32601
    # the SDK refuses it itself too (its own guard, not a wire message)
    assert out["sdkGuard"] is not None


def test_slow_compute_as_task(ts_client: Any) -> None:
    out = ts_client("slow_compute")
    created = out["created"]["task"]
    # R-CREATE-2, R-STATE-1, R-TTL-1, R-TTL-2 (the requested ttl is reported)
    assert created["status"] == "working"
    assert created["createdAt"] and created["lastUpdatedAt"]
    assert created["ttl"] == 120000
    # R-GET-1: the client slept exactly the pollInterval the server suggested
    assert out["polls"] and all(p["sleptMs"] == p["pollInterval"] for p in out["polls"])
    assert out["polls"][-1]["status"] == "completed" == out["final"]["status"]
    # R-RESULT-1, R-RESULT-3, R-RESULT-4
    assert text(out["result"]) == "done after 1s (ts)"
    assert out["result"]["isError"] is False
    assert out["result"]["_meta"][RELATED] == {"taskId": created["taskId"]}
    # R-LIST-3
    assert {"taskId": created["taskId"], "status": "completed"} in out["listed"]
    # R-PROGRESS-1: progress for the original request's token, after CreateTaskResult
    assert out["progress"] and out["progress"][-1]["progress"] == out["progress"][-1]["total"]
    # the SDK's own flow (callToolStream: create, poll, result) ends with our result
    kinds = [m["type"] for m in out["stream"]]
    assert kinds[0] == "taskCreated" and kinds[-1] == "result", out["stream"]
    assert text(out["stream"][-1]["result"]) == "done after 0s (stream)"
    # R-NOTIFY-1, R-NOTIFY-3: status notifications carry the whole Task, no related-task _meta
    for note in out["notifications"]:
        if note["method"] == "notifications/tasks/status":
            assert {"taskId", "status", "createdAt", "lastUpdatedAt", "ttl"} <= set(note["params"])
            assert "_meta" not in note["params"]


def test_cancel(ts_client: Any) -> None:
    out = ts_client("cancel")
    # R-CANCEL-2, R-CANCEL-3
    assert out["cancelled"]["status"] == "cancelled"
    assert out["after"]["status"] == "cancelled"
    # R-CANCEL-1, R-ERR-2
    assert out["cancelAgain"]["error"]["code"] == -32602
    assert "terminal" in out["cancelAgain"]["error"]["message"]
    assert out["listed"] == ["cancelled"]
    # R-ERR-1: unknown taskId -> -32602
    assert out["unknown"]["error"]["code"] == -32602


def test_failing_job(ts_client: Any) -> None:
    out = ts_client("failing_job")
    # R-STATE-4: isError result -> failed, with a diagnostic statusMessage
    assert out["final"]["status"] == "failed"
    assert out["final"]["statusMessage"]
    # R-RESULT-1: tasks/result returns exactly the CallToolResult (isError true)
    assert out["result"]["isError"] is True
    assert text(out["result"]) == "job failed"
    assert out["result"]["_meta"][RELATED] == {"taskId": out["final"]["taskId"]}
    # TS SDK departure: callToolStream reports a failed task as a generic -32603 "Task ... failed"
    # without calling tasks/result, so the isError CallToolResult is never seen (R-RESULT-1).
    assert out["stream"][-1]["type"] == "error"


def test_protocol_error_job(ts_client: Any) -> None:
    out = ts_client("protocol_error_job")
    assert out["final"]["status"] == "failed"  # R-STATE-4, R-ERR-3
    assert out["final"]["statusMessage"]
    # R-RESULT-1: tasks/result answers the same JSON-RPC error
    assert out["resultError"]["code"] == -32603
    assert "protocol_error_job" in out["resultError"]["message"]


@pytest.mark.parametrize(("answer", "expected"), [("accept", "deleted"), ("decline", "kept")])
def test_confirm_delete_elicitation(ts_client: Any, answer: str, expected: str) -> None:
    out = ts_client(f"confirm_{answer}")
    # R-INPUT-1, R-GET-2: polling stops at input_required
    assert out["polls"][-1]["status"] == "input_required"
    # R-INPUT-2: the elicitation carried the task's related-task _meta
    assert len(out["elicitations"]) == 1
    task_id = out["final"]["taskId"]
    assert out["elicitations"][0]["_meta"][RELATED] == {"taskId": task_id}
    # R-INPUT-3, R-INPUT-4: tasks/result delivered it, then the task completed
    assert text(out["result"]) == f"{expected} /tmp/x"
    assert out["result"]["_meta"][RELATED] == {"taskId": task_id}
    assert out["final"]["status"] == "completed"
