"""Every operator surface is off unless configured, needs its own token (never a
requestor's), is served only where configured, and changes nothing the MCP endpoint
answers. Against the example server as a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from testkit.ops import (
    ADMIN_TOKEN,
    ALICE,
    BOB,
    METRICS_TOKEN,
    OpsServer,
    http,
    mcp_session,
    start_task,
)

# operators' surfaces: the door is not what is tested (testkit.doors)
pytestmark = pytest.mark.door_agnostic

#: every admin path (the dashboard's API) and what a correct token gets
ADMIN_PATHS = [
    ("GET", "/admin/api/tasks"),
    ("GET", "/admin/api/summary"),
    ("GET", "/admin/api/tasks/{task}"),
    ("POST", "/admin/api/tasks/{task}/cancel"),
    ("GET", "/admin/api/events"),
]
#: tokens that are not the surface's own
FORGED = [
    ("none", None),
    ("a requestor's", ALICE),
    ("another requestor's", BOB),
    ("random", "x" * 32),
    ("the admin token with a suffix", ADMIN_TOKEN + "x"),
    ("the admin token's prefix", ADMIN_TOKEN[:-1]),
    ("the other operator token", None),  # filled per surface below
]


def _forged(own: str, other: str) -> list[tuple[str, str | None]]:
    return [
        (name, other if name == "the other operator token" else tok) for name, tok in FORGED
    ] + [
        ("the token of another scheme", f"Basic {own}"),
    ]


def _call(server: OpsServer, method: str, path: str, token: str | None) -> int:
    headers = {}
    if token is not None and token.startswith("Basic "):
        headers["Authorization"], token = token, None
    url = server.ops_url + path
    if path.endswith("/events") and token == ADMIN_TOKEN:
        # the event stream stays open: read its first event only
        import urllib.request

        req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(req, timeout=30) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            assert b"hello" in response.readline() + response.readline() + response.readline()
            return int(response.status)
    return http(url, token=token, method=method, headers=headers)[0]


def test_admin_api_needs_the_admin_token(ops_server_factory: Callable[..., OpsServer]) -> None:
    server = ops_server_factory()
    task = start_task(server, ALICE, "slow_compute", "seconds=60")
    for method, template in ADMIN_PATHS:
        path = template.format(task=task)
        for name, token in _forged(ADMIN_TOKEN, METRICS_TOKEN):
            assert _call(server, method, path, token) == 401, (path, name)
    # nothing was cancelled by the refused calls; the admin token reaches every path
    for method, template in ADMIN_PATHS:
        assert _call(server, method, template.format(task=task), ADMIN_TOKEN) == 200, template


def test_metrics_need_the_metrics_token(ops_server_factory: Callable[..., OpsServer]) -> None:
    server = ops_server_factory()
    for name, token in _forged(METRICS_TOKEN, ADMIN_TOKEN):
        status, headers, body = http(server.ops_url + "/metrics", token=token)
        assert status == 401, name
        assert b"mcp_tasks" not in body
        assert headers.get("www-authenticate", headers.get("WWW-Authenticate", "")).startswith(
            "Bearer"
        )
    status, headers, body = http(server.ops_url + "/metrics", token=METRICS_TOKEN)
    assert status == 200 and b"mcp_tasks_created_total" in body


def test_the_dashboard_page_holds_no_data(ops_server_factory: Callable[..., OpsServer]) -> None:
    """The page loads without a token (it asks for one) and carries none of the tasks; it
    is served with a strict content security policy and loads only its own files."""
    server = ops_server_factory()
    task = start_task(server, ALICE, "slow_compute", "seconds=60")
    status, headers, body = http(server.ops_url + "/admin/")
    assert status == 200 and task.encode() not in body and b"alice" not in body
    csp = {k.lower(): v for k, v in headers.items()}["content-security-policy"]
    assert "default-src 'none'" in csp and "connect-src 'self'" in csp
    page = body.decode()
    assert "http://" not in page and "https://" not in page  # nothing fetched elsewhere
    for asset in ("app.js", "app.css"):
        code, _, text = http(server.ops_url + "/admin/" + asset)
        assert code == 200 and b"http://" not in text and b"https://" not in text
    assert http(server.ops_url + "/admin")[0] == 308


def test_surfaces_are_off_unless_configured(
    ops_server_factory: Callable[..., OpsServer],
) -> None:
    """Health alone when no token file is given: /metrics and /admin are 404, as any
    unknown path; without --ops nothing listens on the operators' port."""
    bare = ops_server_factory(metrics=False, admin=False)
    assert http(bare.ops_url + "/healthz")[0] == 200
    for path in ("/metrics", "/admin/", "/admin/api/tasks", "/nothing"):
        assert http(bare.ops_url + path, token=ADMIN_TOKEN)[0] == 404, path
        assert http(bare.ops_url + path, token=METRICS_TOKEN)[0] == 404, path
    off = ops_server_factory(ops=False)
    with pytest.raises(OSError):
        import socket

        socket.create_connection(("127.0.0.1", off.ops_port), timeout=2).close()


def test_the_mcp_endpoint_answers_as_without_operators_R_SEC_1(
    ops_server_factory: Callable[..., OpsServer],
) -> None:
    """The operator paths are not on the MCP port; the operators' tokens are no requestor
    identity there (HTTP 401); tools/list and a task's answers are the same with and
    without the operator surfaces."""
    with_ops = ops_server_factory()
    without = ops_server_factory(ops=False)
    for path in ("/metrics", "/healthz", "/readyz", "/admin/", "/admin/api/tasks"):
        for token in (None, ADMIN_TOKEN, ALICE):
            assert (
                http(with_ops.base + path, token=token)[0]
                == http(without.base + path, token=token)[0]
            ), path
    for server in (with_ops, without):
        for token in (ADMIN_TOKEN, METRICS_TOKEN):
            status, _, _ = http(
                server.url,
                token=token,
                method="POST",
                headers={
                    "Content-Type": "application/json",
                    "Accept": "application/json, text/event-stream",
                },
                body=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode(),
            )
            assert status == 401
    answers = []
    for server in (with_ops, without):
        session = mcp_session(server, ALICE)
        _, tools = session.post("tools/list")
        _, listed = session.post("tasks/list")
        _, unknown = session.post("tasks/get", {"taskId": "no-such-task"})
        answers.append((tools["result"], listed["result"], unknown["error"]))
    assert answers[0] == answers[1]


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--admin-token-file", "{admin}"], "--admin-token-file needs --ops"),
        (["--ops", "127.0.0.1:1", "--admin-token-file", "{alice}"], "a requestor's"),
        (["--ops", "127.0.0.1:1", "--admin-token-file", "{short}"], "at least 16"),
        (
            [
                "--ops",
                "127.0.0.1:1",
                "--admin-token-file",
                "{admin}",
                "--metrics-token-file",
                "{admin}",
            ],
            "different tokens",
        ),
        (["--ops", "nowhere", "--admin-token-file", "{admin}"], "HOST:PORT"),
    ],
)
def test_the_server_refuses_unsafe_operator_flags(
    tmp_path: Path, flags: list[str], says: str
) -> None:
    files = {
        "admin": ADMIN_TOKEN,
        "alice": ALICE,
        "short": "short-token",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text + "\n")
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({ALICE: "alice"}))
    args = [f.format(**{k: str(tmp_path / k) for k in files}) for f in flags]
    out = subprocess.run(
        [sys.executable, "-m", "mcp_tasks.examples.server", "--http", "127.0.0.1:1"]
        + ["--tokens", str(tokens), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and says in out.stderr, out.stderr
