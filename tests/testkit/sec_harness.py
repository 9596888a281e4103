"""Shared helpers for the hardening tests: start the example server as a
real subprocess and talk raw JSON-RPC to it, over Streamable HTTP and stdio.

``testkit.mcp_e2e`` drives the server through the ``mcp`` SDK client, which
validates what it sends; attacks need a raw wire, and the limit/soak tests need
an example server with low limits (its ``--max-active``, ``--rate-limit``,
``--max-ttl``, ``--default-ttl`` and ``--page-size`` flags).

Servers are stopped by PID, always; nothing here asserts on timing.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from testkit.example_server import (
    LIMIT_FLAGS,
    SERVER_MODULE,
    STARTUP_TIMEOUT,
    HttpServer,
    limit_flags,
    rss_kb,
    server_command,
)
from testkit.procs import python_env
from testkit.wait import until

__all__ = [  # re-exported from testkit.example_server: the hardening tests use them
    "LIMIT_FLAGS",
    "SERVER_MODULE",
    "HttpServer",
    "limit_flags",
    "rss_kb",
    "server_command",
]

PROTOCOL = "2025-11-25"
TERMINAL = frozenset({"completed", "failed", "cancelled"})
TOKENS = {"tok-alice": "alice", "tok-bob": "bob", "tok-carol": "carol"}
ACCEPT = "application/json, text/event-stream"

#: cases run by the fuzzers, printed in pytest's terminal summary (key -> count)
FUZZ_COUNTS: dict[str, int] = {}
#: figures reported by the soak test (printed in pytest's terminal summary)
SOAK_REPORT: list[str] = []


# --------------------------------------------------------------------------- raw wire


def read_response(sock: socket.socket, got: bytes = b"") -> tuple[bytes, bytes]:
    """One whole HTTP/1.1 response read from ``sock`` (``got``: what was read already): its
    head, and what came after its Content-Length body (the next pipelined answers)."""
    while b"\r\n\r\n" not in got:
        chunk = sock.recv(65536)
        assert chunk, f"the connection closed inside a response's head: {got[:300]!r}"
        got += chunk
    head, _, got = got.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(got) < length:
        got += sock.recv(65536)
    return head, got[length:]


def error_of(answer: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON-RPC ``error`` of ``answer``, which must be a refusal (the test fails showing
    the answer otherwise)."""
    assert "error" in answer, f"answered where it must be refused: {answer}"
    err: dict[str, Any] = answer["error"]
    return err


@dataclass
class Reply:
    """What came back for one POST: the HTTP status, the JSON-RPC messages, the raw body."""

    status: int
    messages: list[dict[str, Any]] = field(default_factory=list)
    body: str = ""

    def response(self, request_id: Any) -> dict[str, Any] | None:
        for m in self.messages:
            if "method" not in m and m.get("id") == request_id:
                return m
        return None


def parse_body(content_type: str, body: str) -> list[dict[str, Any]]:
    """JSON-RPC messages of a Streamable HTTP answer (JSON or SSE)."""
    if not body.strip():
        return []
    if "text/event-stream" in content_type:
        out: list[dict[str, Any]] = []
        for event in body.replace("\r\n", "\n").split("\n\n"):
            data = "\n".join(
                line[5:].lstrip() for line in event.split("\n") if line.startswith("data:")
            )
            if data.strip():
                out.append(json.loads(data))
        return out
    try:
        parsed = json.loads(body)
    except ValueError:
        return []  # not JSON (e.g. the transport's plain-text 413); the caller checks
    return parsed if isinstance(parsed, list) else [parsed]


def init_request(request_id: Any = 0, capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": PROTOCOL,
            "capabilities": capabilities if capabilities is not None else {"elicitation": {}},
            "clientInfo": {"name": "sec-tests", "version": "1"},
        },
    }


class RawPeer:
    """What both raw wires share: numbered JSON-RPC requests, ``ok`` for a result.

    A wire implements ``_exchange``: send one request, return its response or raise."""

    _next = 1000

    def _exchange(self, method: str, msg: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """One request; returns its JSON-RPC response (``result`` or ``error``)."""
        self._next += 1
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": self._next, "method": method}
        if params is not None:
            msg["params"] = params
        return self._exchange(method, msg)

    def ok(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        resp = self.call(method, params)
        if "result" not in resp:
            raise AssertionError(f"{method} failed: {resp}")
        result: dict[str, Any] = resp["result"]
        return result


class RawHttp(RawPeer):
    """A raw Streamable HTTP client: one MCP session (unless ``stateless``), optional bearer token."""

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        timeout: float = 60.0,
        capabilities: dict[str, Any] | None = None,
        local_address: str | None = None,
        stateless: bool = False,
    ) -> None:
        self.url = url
        self.headers = {"Accept": ACCEPT, "Content-Type": "application/json"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        if stateless:  # no session to carry the version: every request names it
            self.headers["mcp-protocol-version"] = PROTOCOL
        #: ``local_address``: the client's own address (another 127.x.y.z: another client
        #: host on loopback)
        transport = httpx.HTTPTransport(local_address=local_address) if local_address else None
        self.http = httpx.Client(timeout=httpx.Timeout(timeout), transport=transport)
        self.session_id: str | None = None
        self.capabilities = capabilities

    def __enter__(self) -> RawHttp:
        return self.initialize()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.session_id is not None:
            try:
                self.http.delete(self.url, headers=self._headers(), timeout=5)
            except httpx.HTTPError:
                pass
        self.http.close()

    def _headers(self) -> dict[str, str]:
        h = dict(self.headers)
        if self.session_id is not None:
            h["mcp-session-id"] = self.session_id
            h["mcp-protocol-version"] = PROTOCOL
        return h

    def initialize(self) -> RawHttp:
        r = self.http.post(
            self.url, headers=self.headers, json=init_request(capabilities=self.capabilities)
        )
        r.raise_for_status()
        self.session_id = r.headers.get("mcp-session-id")
        self.post_raw(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        return self

    def post_raw(self, body: str | bytes, timeout: float | None = None) -> Reply:
        content = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
        kw: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
        r = self.http.post(self.url, headers=self._headers(), content=content, **kw)
        text = r.text
        return Reply(r.status_code, parse_body(r.headers.get("content-type", ""), text), text)

    def _exchange(self, method: str, msg: dict[str, Any]) -> dict[str, Any]:
        reply = self.post_raw(json.dumps(msg))
        resp = reply.response(msg["id"])
        if resp is None:
            raise AssertionError(f"no response to {method}: HTTP {reply.status} {reply.body[:300]}")
        return resp

    def create(self, tool: str, arguments: dict[str, Any], ttl: int | None = None) -> str:
        task: dict[str, Any] = {} if ttl is None else {"ttl": ttl}
        res = self.ok("tools/call", {"name": tool, "arguments": arguments, "task": task})
        return str(res["task"]["taskId"])

    def wait(self, task_id: str, timeout: float = 60.0) -> dict[str, Any]:
        """Poll ``tasks/get`` until the task is terminal; that answer."""
        return until(
            lambda: self.ok("tasks/get", {"taskId": task_id}),
            timeout,
            satisfied=lambda task: task["status"] in TERMINAL,
            what=f"task {task_id} terminal",
        )

    def list_all(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            res = self.ok("tasks/list", {"cursor": cursor} if cursor else {})
            out.extend(res["tasks"])
            cursor = res.get("nextCursor")
            if not cursor:
                return out


class RawStdio(RawPeer):
    """The example server over stdio, one JSON-RPC message per line."""

    def __init__(self, *args: str, engine_config: dict[str, Any] | None = None) -> None:
        self.proc = subprocess.Popen(
            server_command("--stdio", *args, engine_config=engine_config),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=python_env(),
        )
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.stderr = bytearray()
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.extend(line)

    def __enter__(self) -> RawStdio:
        self.send(json.dumps(init_request()))
        resp = self.recv_response(0, timeout=STARTUP_TIMEOUT)
        assert resp is not None and "result" in resp, resp
        self.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except (subprocess.TimeoutExpired, OSError):
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def send(self, line: str | bytes) -> None:
        data = line.encode("utf-8", "surrogatepass") if isinstance(line, str) else line
        assert self.proc.stdin is not None
        self.proc.stdin.write(data.replace(b"\n", b" ") + b"\n")
        self.proc.stdin.flush()

    def messages(self, timeout: float) -> Iterator[dict[str, Any]]:
        """Messages until ``timeout`` passes without one."""
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                return
            if line is None:
                return
            yield json.loads(line)

    def recv_response(self, request_id: Any, timeout: float = 30.0) -> dict[str, Any] | None:
        """The response to ``request_id`` (server notifications in between are skipped)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                return None
            if line is None:
                return None
            msg = json.loads(line)
            if "method" not in msg and msg.get("id") == request_id:
                return dict(msg)

    def _exchange(self, method: str, msg: dict[str, Any]) -> dict[str, Any]:
        self.send(json.dumps(msg))
        resp = self.recv_response(msg["id"])
        if resp is None:
            raise AssertionError(f"no response to {method} over stdio")
        return resp


LEAK_MARKERS = ("Traceback", 'File "', "/site-packages/", '.py", line')


def assert_no_leak(text: str) -> None:
    """No Python traceback or source path reaches the client."""
    for marker in LEAK_MARKERS:
        assert marker not in text, f"internal detail {marker!r} leaked to the client: {text[:500]}"
