"""A raw 2026-07-28 client for tests: the stateless wire of the tasks extension, by hand.

No ``initialize`` and no session: every request is one HTTP POST carrying the headers
``MCP-Protocol-Version``, ``Mcp-Method`` and ``Mcp-Name`` (``params.name`` of
``tools/call``, ``params.taskId`` of ``tasks/get|update|cancel``: X-HTTP-1) and, in
``params._meta``, the envelope ``io.modelcontextprotocol/protocolVersion``,
``.../clientInfo`` and ``.../clientCapabilities`` whose ``extensions`` declare
``io.modelcontextprotocol/tasks`` when the request opts in (X-CAP-1: per request, never
remembered). Answers come as JSON or as an event stream (the ``data:`` event with the
request's id). Nothing here hides an error: :meth:`ExtClient.send` returns the JSON-RPC
message as received.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import httpx

from testkit.wait import until as wait_until

REVISION = "2026-07-28"
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
META = "io.modelcontextprotocol/"
NAME_PARAM = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
NAME_PARAM.update({m: "taskId" for m in ("tasks/get", "tasks/update", "tasks/cancel")})
TERMINAL = frozenset({"completed", "failed", "cancelled"})


class ExtClient:
    """``send(method, params)`` on the stateless 2026-07-28 wire of one server URL."""

    def __init__(
        self,
        url: str,
        timeout: float = 30,
        headers: dict[str, str] | None = None,
        *,
        local_address: str | None = None,
    ) -> None:
        self.url = url
        #: sent with every request (e.g. ``Authorization``), before per-call ``headers``
        self.headers = dict(headers or {})
        #: ``local_address``: the client's own address (another 127.x.y.z: another client
        #: host on loopback)
        transport = httpx.HTTPTransport(local_address=local_address) if local_address else None
        self.http = httpx.Client(timeout=timeout, transport=transport)
        self._ids = itertools.count(1)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> ExtClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(
        self,
        method: str,
        params: dict[str, Any] | None,
        tasks: bool,
        headers: dict[str, str] | None,
        rid: Any = None,
    ) -> tuple[Any, dict[str, Any], dict[str, str]]:
        """The request's id, JSON-RPC body and HTTP headers."""
        params = dict(params or {})
        caps: dict[str, Any] = {"extensions": {TASKS_EXTENSION: {}}} if tasks else {}
        params["_meta"] = {
            f"{META}protocolVersion": REVISION,
            f"{META}clientInfo": {"name": "mcptask-tests-ext-wire", "version": "0"},
            f"{META}clientCapabilities": caps,
            **params.get("_meta", {}),
        }
        rid = next(self._ids) if rid is None else rid
        head = {
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": REVISION,
            "Mcp-Method": method,
        }
        if method in NAME_PARAM and NAME_PARAM[method] in params:
            head["Mcp-Name"] = str(params[NAME_PARAM[method]])
        head.update(self.headers)
        head.update(headers or {})
        head["Content-Type"] = "application/json"
        return rid, {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}, head

    def send(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        tasks: bool = True,
        headers: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """One request; the JSON-RPC response (``result`` or ``error``) as received."""
        rid, body, head = self._request(method, params, tasks, headers)
        # ASCII-escaped JSON: a string that is not valid Unicode (a lone surrogate) goes out
        # as its \uXXXX escape, as any JSON client would send it
        response = self.http.post(self.url, content=json.dumps(body).encode(), headers=head)
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            for line in response.text.splitlines():
                if line.startswith("data:"):
                    message: dict[str, Any] = json.loads(line[5:])
                    if message.get("id") == rid:
                        return message
            raise AssertionError(f"{method}: no answer in the event stream: {response.text!r}")
        answer: dict[str, Any] = response.json()
        return answer

    def stream(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        rid: Any = None,
        tasks: bool = True,
        headers: dict[str, str] | None = None,
    ) -> Iterator[dict[str, Any]]:
        """One request; every JSON-RPC message of its answer as it arrives, in order, the
        response itself last (a JSON answer is the only message)."""
        rid, body, head = self._request(method, params, tasks, headers, rid)
        content = json.dumps(body).encode()
        with self.http.stream("POST", self.url, content=content, headers=head) as response:
            if not response.headers.get("content-type", "").startswith("text/event-stream"):
                response.read()
                yield response.json()
                return
            for line in response.iter_lines():
                if line.startswith("data:"):
                    message: dict[str, Any] = json.loads(line[5:])
                    yield message
                    if message.get("id") == rid and ("result" in message or "error" in message):
                        return

    def result(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> Any:
        """:meth:`send`, asserting success; the ``result``."""
        message = self.send(method, params, **kw)
        assert "result" in message, f"{method}: {message}"
        return message["result"]

    def wait(
        self, task_id: str, until: frozenset[str] = TERMINAL, timeout: float = 30
    ) -> dict[str, Any]:
        """Poll ``tasks/get`` until the status is in ``until``; that answer (a
        :class:`~testkit.wait.WaitTimeout` naming the last status after ``timeout`` s)."""
        task: dict[str, Any] = wait_until(
            lambda: self.result("tasks/get", {"taskId": task_id}),
            timeout,
            satisfied=lambda task: task["status"] in until,
            what=f"task {task_id} {'/'.join(sorted(until))}",
        )
        return task
