"""A lean load driver: raw JSON-RPC over Streamable HTTP on asyncio streams (HTTP/1.1 keep-alive).

One ``Conn`` is one TCP connection with one request in flight; a ``Session`` is an MCP
session (``Mcp-Session-Id``, 2025-11-25) that may use several connections; a ``Stateless``
client speaks 2026-07-28 with the tasks extension declared: no ``initialize`` and no
session, every request carries ``MCP-Protocol-Version``, ``Mcp-Method`` and ``Mcp-Name``
headers and the ``_meta`` envelope (protocol version, client info, client capabilities
with ``io.modelcontextprotocol/tasks``). Responses may be
``application/json`` or ``text/event-stream`` (the answer is the ``data:`` whose ``id``
matches), with ``Content-Length`` or chunked bodies. ``token``: every request carries
``Authorization: Bearer TOKEN`` (servers that bind tasks to token subjects; a stateless
server answers ``initialize`` without a session id, and the client then sends no session
header but still the negotiated protocol version). No HTTP library: a Python client
such as httpx spends about 1 ms of CPU per request, enough to cap what we measure;
this one spends a few tens of microseconds (the benchmark reports the figure).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

PROTOCOL_VERSION = "2025-11-25"
EXT_PROTOCOL_VERSION = "2026-07-28"
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
TERMINAL = frozenset({"completed", "failed", "cancelled"})
#: The param an ``Mcp-Name`` header repeats, per method (2026-07-28, X-HTTP-1).
NAME_PARAM = {"tools/call": "name", "tasks/get": "taskId", "tasks/update": "taskId"}
NAME_PARAM["tasks/cancel"] = "taskId"
_loads = json.loads
_dumps = json.JSONEncoder(separators=(",", ":")).encode


class RpcError(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.error = error


#: What a workload run raises when a server fails it: reported as the run's error, the
#: benchmark goes on with the next run.
RUN_FAILURES = (RuntimeError, RpcError, OSError, asyncio.IncompleteReadError)


class Conn:
    def __init__(self, host: str, port: int, path: str = "/mcp") -> None:
        self.host, self.port, self.path = host, port, path
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> Conn:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        return self

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()

    async def post(self, head: bytes, body: bytes) -> tuple[int, dict[bytes, bytes], bytes]:
        """Send one POST (``head`` = request line + headers without Content-Length)."""
        assert self.reader is not None and self.writer is not None
        request = b"%sContent-Length: %d\r\n\r\n%s" % (head, len(body), body)
        if self.reader.at_eof():  # the server closed the idle keep-alive connection
            self.close()
            await self.open()
            assert self.writer is not None and self.reader is not None
        self.writer.write(request)
        try:
            raw = await self.reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionResetError) as exc:
            if isinstance(exc, asyncio.IncompleteReadError) and exc.partial:
                raise
            # The server closed an idle keep-alive connection (uvicorn's default keep-alive
            # timeout is 5 s) as we sent: reconnect, send again once.
            self.close()
            await self.open()
            assert self.writer is not None and self.reader is not None
            self.writer.write(request)
            raw = await self.reader.readuntil(b"\r\n\r\n")
        reader = self.reader
        lines = raw.split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        headers: dict[bytes, bytes] = {}
        for line in lines[1:]:
            if line:
                k, _, v = line.partition(b":")
                headers[k.strip().lower()] = v.strip()
        length = headers.get(b"content-length")
        if length is not None:
            data = await reader.readexactly(int(length))
        elif headers.get(b"transfer-encoding", b"").lower() == b"chunked":
            parts = []
            while True:
                size = int((await reader.readuntil(b"\r\n"))[:-2].split(b";")[0], 16)
                if size == 0:
                    await reader.readuntil(b"\r\n")
                    break
                parts.append(await reader.readexactly(size))
                await reader.readexactly(2)
            data = b"".join(parts)
        elif status in (202, 204):
            data = b""
        else:  # read to close
            data = await reader.read()
        return status, headers, data


def _answer(method: str, rid: int, status: int, headers: dict[bytes, bytes], data: bytes) -> Any:
    """The ``result`` of the response to request ``rid`` (JSON or an event stream)."""
    if headers.get(b"content-type", b"").startswith(b"text/event-stream"):
        msg = None
        for line in data.split(b"\n"):
            if line.startswith(b"data:"):
                cand = _loads(line[5:])
                if cand.get("id") == rid:
                    msg = cand
                    break
        if msg is None:
            raise RuntimeError(f"{method}: no answer in the event stream (HTTP {status})")
    else:
        if status != 200 and not data.startswith(b"{"):
            raise RuntimeError(f"{method}: HTTP {status}: {data[:200]!r}")
        msg = _loads(data)
    if "error" in msg:
        raise RpcError(msg["error"])
    return msg["result"]


class _Client:
    """Connections and request ids, shared by both protocol revisions."""

    def __init__(self, host: str, port: int, path: str = "/mcp", token: str | None = None) -> None:
        self.host, self.port, self.path = host, port, path
        self.token = token
        self.conns: list[Conn] = []
        self._next = 0
        self.sent = 0  # requests sent

    async def _open(self, connections: int) -> None:
        self.conns = [
            await Conn(self.host, self.port, self.path).open() for _ in range(connections)
        ]

    def _base_head(self) -> str:
        return (
            f"POST {self.path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        ) + (f"Authorization: Bearer {self.token}\r\n" if self.token else "")

    def close(self) -> None:
        for c in self.conns:
            c.close()

    async def _send(self, head: bytes, method: str, params: dict[str, Any], conn: int) -> Any:
        self._next += 1
        self.sent += 1
        rid = self._next
        body = _dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode()
        status, headers, data = await self.conns[conn].post(head, body)
        return _answer(method, rid, status, headers, data)


class Session(_Client):
    """An initialized MCP session; ``call`` sends a request on a given connection."""

    def __init__(self, host: str, port: int, path: str = "/mcp", token: str | None = None) -> None:
        super().__init__(host, port, path, token)
        self.sid: str | None = None
        self.initialized = False
        self._head = b""

    def _make_head(self) -> bytes:
        head = self._base_head()
        if self.sid is not None:
            head += f"Mcp-Session-Id: {self.sid}\r\n"
        if self.initialized:
            head += f"Mcp-Protocol-Version: {PROTOCOL_VERSION}\r\n"
        return head.encode()

    async def open(self, connections: int = 1) -> Session:
        await self._open(connections)
        self._head = self._make_head()
        init = {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "mcptask-bench-driver", "version": "0"},
        }
        status, headers, _ = await self.conns[0].post(
            self._head,
            _dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}).encode(),
        )
        if status != 200:
            raise RuntimeError(f"initialize answered HTTP {status}")
        sid = headers.get(b"mcp-session-id")
        self.sid = sid.decode() if sid else None
        self.initialized = True
        self._head = self._make_head()
        await self.conns[0].post(
            self._head, b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
        )
        return self

    async def call(self, method: str, params: dict[str, Any], conn: int = 0) -> dict[str, Any]:
        result: dict[str, Any] = await self._send(self._head, method, params, conn)
        return result

    async def task_call(
        self, seconds: float, conn: int = 0, ttl: int = 3_600_000
    ) -> dict[str, Any]:
        """Task-augmented ``slow_compute``; returns the ``task`` of ``CreateTaskResult``."""
        res = await self.call(
            "tools/call",
            {"name": "slow_compute", "arguments": {"seconds": seconds}, "task": {"ttl": ttl}},
            conn,
        )
        task: dict[str, Any] = res["task"]
        return task


class Stateless(_Client):
    """2026-07-28 without a session, the tasks extension declared on every request."""

    def __init__(self, host: str, port: int, path: str = "/mcp", token: str | None = None) -> None:
        super().__init__(host, port, path, token)
        self._head = self._base_head() + f"MCP-Protocol-Version: {EXT_PROTOCOL_VERSION}\r\n"
        self.meta = {
            "io.modelcontextprotocol/protocolVersion": EXT_PROTOCOL_VERSION,
            "io.modelcontextprotocol/clientInfo": {"name": "mcptask-bench-driver", "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS_EXTENSION: {}}},
        }

    async def open(self, connections: int = 1) -> Stateless:
        await self._open(connections)
        return self

    async def call(self, method: str, params: dict[str, Any], conn: int = 0) -> dict[str, Any]:
        head = f"{self._head}Mcp-Method: {method}\r\n"
        name = params.get(NAME_PARAM.get(method, ""))
        if name is not None:
            head += f"Mcp-Name: {name}\r\n"
        result: dict[str, Any] = await self._send(
            head.encode(), method, {**params, "_meta": self.meta}, conn
        )
        return result

    async def advertises_tasks(self) -> bool:
        """``server/discover`` lists the tasks extension (X-CAP-2)."""
        try:
            found = await self.call("server/discover", {})
        except RpcError:
            return False
        return TASKS_EXTENSION in (found.get("capabilities", {}).get("extensions") or {})

    async def task_call(self, seconds: float, conn: int = 0) -> dict[str, Any]:
        """``slow_compute`` declaring the extension: the flat ``CreateTaskResult``, or the
        plain result when the server answered at once (X-CREATE-4)."""
        return await self.call(
            "tools/call", {"name": "slow_compute", "arguments": {"seconds": seconds}}, conn
        )

    async def wait_terminal(
        self, created: dict[str, Any], pause_s: float, conn: int = 0
    ) -> dict[str, Any]:
        """``tasks/get`` every ``pause_s`` until the task is terminal (its last answer)."""
        if created.get("resultType") != "task":
            return created
        params = {"taskId": created["taskId"]}
        while True:
            got = await self.call("tasks/get", params, conn)
            if got["status"] in TERMINAL:
                return got
            await asyncio.sleep(pause_s)
