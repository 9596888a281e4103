"""The example server with its operator surfaces, as a real subprocess on free 127.0.0.1
ports (stopped by PID), its task requests through one front door (:mod:`testkit.doors`),
and plain HTTP calls to them; ``mcptask`` as a real process."""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from testkit.doors import door_args
from testkit.example_server import SERVER_MODULE
from testkit.procs import (
    ChildProcess,
    free_port,
    on_free_ports,
    python_env,
    wait_listening,
)
from testkit.warm import Proc, run_python, start_python

#: requestors' bearer tokens (``--tokens``): token -> subject
TOKENS = {"tok-alice-0123456789": "alice", "tok-bob-0123456789ab": "bob"}
ALICE, BOB = "tok-alice-0123456789", "tok-bob-0123456789ab"
#: the operators' own tokens
METRICS_TOKEN = "metrics-token-0123456789abcdef"
ADMIN_TOKEN = "admin-token-0123456789abcdefgh"
STARTUP_TIMEOUT = 60.0


class OpsServer(ChildProcess):
    """``python -m mcp_tasks.examples.server --http ... --tokens ... [--ops ...]``;
    ``front_door`` has no default (the fixtures pass their ``front_door`` parameter)."""

    def __init__(
        self,
        tmp: Path,
        *,
        front_door: str,
        store: str = "memory",
        ops: bool = True,
        metrics: bool = True,
        admin: bool = True,
        extra: tuple[str, ...] = (),
        admin_token: str = ADMIN_TOKEN,
    ) -> None:
        self.tmp = tmp
        self._choose_ports()
        tokens = tmp / "tokens.json"
        tokens.write_text(json.dumps(TOKENS))
        args = ["--tokens", str(tokens), "--store", store]
        if ops and metrics:
            args += ["--metrics-token-file", str(_write(tmp / "metrics.token", METRICS_TOKEN))]
        #: the admin token's file, as ``mcptask admin --token-file`` reads it (None: no admin)
        self.admin_token_file = _write(tmp / "admin.token", admin_token) if ops and admin else None
        if self.admin_token_file is not None:
            args += ["--admin-token-file", str(self.admin_token_file)]
        #: the flags but the two addresses (``_argv`` adds them: a retry picks other ports)
        self.args = [*args, *door_args(front_door), *extra]
        self.front_door = front_door
        self.has_ops = ops
        self.log_path = tmp / f"server-{self.port}.log"
        self.proc: Proc | None = None

    def _choose_ports(self) -> None:
        self.port = free_port()
        self.ops_port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.base = f"http://127.0.0.1:{self.port}"
        self.ops_url = f"http://127.0.0.1:{self.ops_port}"

    def _argv(self) -> list[str]:
        ops = ["--ops", f"127.0.0.1:{self.ops_port}"] if self.has_ops else []
        return ["--http", f"127.0.0.1:{self.port}", *ops, *self.args]

    def start(self) -> OpsServer:
        """Start it and wait until it listens on both ports; ports another test process took
        in the meantime are given up for two others."""
        return on_free_ports(self._start, self._choose_ports)

    def _start(self) -> OpsServer:
        with open(self.log_path, "ab") as log:
            self.proc = start_python(SERVER_MODULE, self._argv(), log, python_env())
        wait_listening(self.proc, self.port, self.log_path, STARTUP_TIMEOUT)
        if self.has_ops:  # a failed wait stops the process (wait_listening)
            wait_listening(self.proc, self.ops_port, self.log_path, STARTUP_TIMEOUT, "ops")
        return self

    def metrics(self) -> str:
        """The ``/metrics`` page, read with the metrics token."""
        status, _, body = http(self.ops_url + "/metrics", token=METRICS_TOKEN)
        assert status == 200, (status, body[:200])
        return body.decode()


def _write(path: Path, text: str) -> Path:
    path.write_text(text + "\n")
    return path


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(NoRedirect)


def http(
    url: str,
    *,
    token: str | None = None,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """One plain HTTP request: ``(status, headers, body)``, errors included."""
    sent = dict(headers or {})
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=body, method=method, headers=sent)
    try:
        with _OPENER.open(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def mcptask(
    *args: str, timeout: float = 120, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``mcptask args...`` (``python -m mcp_tasks.cli``, started warm: :mod:`testkit.warm`);
    its stdin ``input``, else empty."""
    return run_python("mcp_tasks.cli", list(args), env=python_env(), timeout=timeout, input=input)


def start_task(server: OpsServer, token: str, tool: str, *arguments: str) -> str:
    """A task made through the real client (``mcptask call --detach``): its ID."""
    out = mcptask("call", server.url, tool, *arguments, "--detach", "--token", token)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def mcp_session(server: OpsServer, token: str) -> McpHttp:
    """A raw Streamable HTTP session of a requestor (``initialize`` done)."""
    return McpHttp(server.url, token).initialize()


class McpHttp:
    """JSON-RPC over Streamable HTTP by hand: one request, its answer (JSON or SSE)."""

    def __init__(self, url: str, token: str) -> None:
        self.url = url
        self.token = token
        self.session: str | None = None
        self.next_id = 0

    def post(self, method: str, params: dict[str, Any] | None = None) -> tuple[int, Any]:
        self.next_id += 1
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            msg["params"] = params
        return self._send(msg)

    def _send(self, msg: dict[str, Any]) -> tuple[int, Any]:
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2025-11-25",
        }
        if self.session is not None:
            headers["Mcp-Session-Id"] = self.session
        status, got, body = http(
            self.url,
            token=self.token,
            method="POST",
            headers=headers,
            body=json.dumps(msg).encode(),
        )
        lowered = {k.lower(): v for k, v in got.items()}
        self.session = lowered.get("mcp-session-id", self.session)
        text = body.decode()
        if lowered.get("content-type", "").startswith("text/event-stream"):
            datas = [line[6:] for line in text.splitlines() if line.startswith("data: ")]
            text = datas[-1] if datas else ""
        return status, json.loads(text) if text.strip() else None

    def initialize(self) -> McpHttp:
        status, _ = self.post(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "ops-tests", "version": "1"},
            },
        )
        assert status == 200
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return self
