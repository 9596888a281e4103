"""FastMCP 4 (``fastmcp-tasks`` 4.1.4), a tasks-extension peer we did not write.

Its virtualenv (``tests/interop/.venv-fastmcp``) is made on demand by
``testkit.fastmcp_peer``: skipped without a package registry, a failure under ``CI``. Its
server is proven on a raw stateless 2026-07-28 client (``testkit.ext_wire``); its client
(``testkit.fastmcp_client``, a real process) drives our example server's extension face,
through each front door: the example tool contract, and two FastMCP clients of two bearer
subjects on one task.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testkit.example_server import ServerPool
from testkit.ext_wire import TASKS_EXTENSION, ExtClient
from testkit.fastmcp_peer import CLIENT_SCRIPT, peer_env, peer_python
from testkit.interop import FastMcpServer, HttpServer
from testkit.mcp_e2e import TOKENS
from testkit.procs import running

#: What ``fastmcp_client.py`` must get from a server with the example tool contract.
EXPECTED_CALLS: dict[str, dict[str, Any]] = {
    "greet": {"is_error": False, "text": ["Hello, Ada!"]},
    "slow_compute": {"is_error": False, "text": ["done after 0.5s (fastmcp)"]},
    "confirm_delete": {"is_error": False, "text": ["deleted a.txt"]},
    "multi_input": {"is_error": False, "text": ["answers: Ada accept, Ada accept"]},
    "failing_job": {"is_error": True, "text": ["job failed"]},
    "protocol_error_job": {"is_error": True},
    "test_tool_with_task": {"is_error": False, "text": ["Hello, Ada!"]},
}


@pytest.fixture(scope="module")
def fastmcp_python() -> Path:
    return peer_python()


@pytest.fixture(scope="module")
def fastmcp_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``fastmcp_server.py`` on a free 127.0.0.1 port (stopped by PID)."""
    server = FastMcpServer(tmp_path_factory.mktemp("fastmcp"))
    with running(server):
        yield server.url


def drive(python: Path, url: str, *args: str) -> dict[str, Any]:
    """Run ``fastmcp_client.py URL ARGS...``; its JSON report."""
    out = subprocess.run(
        [str(python), str(CLIENT_SCRIPT), url, *args],
        capture_output=True,
        text=True,
        timeout=240,
        stdin=subprocess.DEVNULL,
        env=peer_env(),
    )
    lines = [line for line in out.stdout.splitlines() if line.strip()]
    assert out.returncode == 0 and lines, out.stdout[-3000:] + out.stderr[-3000:]
    report: dict[str, Any] = json.loads(lines[-1])
    return report


def assert_contract(report: dict[str, Any]) -> None:
    assert report["protocol_version"] == "2026-07-28"
    for tool, expected in EXPECTED_CALLS.items():
        got = report["calls"][tool]
        assert {k: got.get(k) for k in expected} == expected, (tool, got)
    assert report["handle"].get("status") in ("working", "input_required"), report["handle"]
    assert report["handle"].get("after_cancel") == "cancelled", report["handle"]


def test_fastmcp_server_serves_task_lifecycle(fastmcp_url: str) -> None:
    """The peer, checked on the raw stateless wire: discover, create, poll, input, cancel."""
    with ExtClient(fastmcp_url) as c:
        # X-CAP-2: the extension in server/discover
        discover = c.result("server/discover")
        assert TASKS_EXTENSION in discover["capabilities"]["extensions"]
        # X-RT-1, X-CREATE-6: a flat CreateTaskResult; X-GET-4, X-GET-5: the result inlined
        created = c.result("tools/call", {"name": "slow_compute", "arguments": {"seconds": 0.2}})
        assert created["resultType"] == "task" and created["status"] == "working"
        assert not {"task", "result", "error", "inputRequests"} & set(created)
        done = c.wait(created["taskId"])
        assert done["status"] == "completed" and done["resultType"] == "complete"
        assert done["result"]["content"][0]["text"] == "done after 0.2s (no label)"
        # X-CAP-8: a required tool without the capability -> -32021 + requiredCapabilities
        refused = c.send("tools/call", {"name": "failing_job", "arguments": {}}, tasks=False)
        assert refused["error"]["code"] == -32021
        assert TASKS_EXTENSION in refused["error"]["data"]["requiredCapabilities"]["extensions"]
        # X-UPD-1, X-UPD-9: input_required with inputRequests, answered by tasks/update
        created = c.result("tools/call", {"name": "confirm_delete", "arguments": {"filename": "x"}})
        asking = c.wait(created["taskId"], until=frozenset({"input_required"}))
        keys = list(asking["inputRequests"])
        assert asking["status"] == "input_required" and keys, asking
        answers = {k: {"action": "accept", "content": {"confirm": True}} for k in keys}
        ack = c.result("tasks/update", {"taskId": created["taskId"], "inputResponses": answers})
        assert ack["resultType"] == "complete" and "status" not in ack
        done = c.wait(created["taskId"])
        assert done["result"]["content"][0]["text"] == "deleted x"
        # X-CAN-3: cancel is an empty ack; the task then settles cancelled
        created = c.result("tools/call", {"name": "slow_compute", "arguments": {"seconds": 30}})
        ack = c.result("tasks/cancel", {"taskId": created["taskId"]})
        assert ack["resultType"] == "complete" and "status" not in ack
        assert c.wait(created["taskId"])["status"] == "cancelled"
        # X-COMPAT-4: tasks/result is gone on this face
        assert c.send("tasks/result", {"taskId": created["taskId"]})["error"]["code"] == -32601


@pytest.fixture(scope="module")
def ours_with_tokens(
    http_server_pool: ServerPool, front_door: str, tmp_path_factory: pytest.TempPathFactory
) -> HttpServer:
    """Our example server binding tasks to bearer-token subjects (``--tokens``)."""
    tokens = tmp_path_factory.mktemp("fastmcp-subjects") / "tokens.json"
    tokens.write_text(json.dumps(TOKENS))
    return http_server_pool.get(front_door, "--tokens", str(tokens))


def test_fastmcp_clients_of_two_subjects_share_nothing_on_our_server(
    fastmcp_python: Path, ours_with_tokens: HttpServer
) -> None:
    """X-SEC-2, R-SEC-1: FastMCP's clients with the bearer tokens of two subjects against our
    server. B's ``tasks/get`` and ``tasks/cancel`` of A's task are answered exactly like
    those of an id nobody has; a new connection of A's reaches the task (it is bound to
    the subject, not the connection) and cancels it, and A's first connection sees that."""
    report = drive(fastmcp_python, ours_with_tokens.url, "--subjects", "tok-alice", "tok-bob")
    assert report["created"] == "working", report
    unknown = report["b_unknown"]
    assert unknown.get("refused", {}).get("code") == -32602, report
    assert report["b_get"] == report["b_cancel"] == unknown, report
    assert report["a_get"] == {"status": "working"}, report
    assert report["a_cancel"] == report["a_after"] == {"status": "cancelled"}, report


def test_fastmcp_client_drives_our_server(fastmcp_python: Path, http_server: HttpServer) -> None:
    """FastMCP's client against our example server (through each front door): the same
    contract, over tasks."""
    report = drive(fastmcp_python, http_server.url)
    assert_contract(report)
