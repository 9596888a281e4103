"""A lean load driver: raw JSON-RPC over Streamable HTTP on asyncio streams (HTTP/1.1 keep-alive).

One ``Conn`` is one TCP connection with one request in flight; a ``Session`` is an MCP
session (``Mcp-Session-Id``) that may use several connections. Responses may be
``application/json`` or ``text/event-stream`` (the answer is the ``data:`` whose ``id``
matches), with ``Content-Length`` or chunked bodies. No HTTP library: a Python client
such as httpx spends about 1 ms of CPU per request, enough to cap what we measure;
this one spends a few tens of microseconds (the benchmark reports the figure).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

PROTOCOL_VERSION = "2025-11-25"
_loads = json.loads
_dumps = json.JSONEncoder(separators=(",", ":")).encode


class RpcError(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.error = error


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
        self.writer.write(request)
        try:
            raw = await self.reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            if exc.partial:
                raise
            # The server closed an idle keep-alive connection: reconnect, send again once.
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


class Session:
    """An initialized MCP session; ``call`` sends a request on a given connection."""

    def __init__(self, host: str, port: int, path: str = "/mcp") -> None:
        self.host, self.port, self.path = host, port, path
        self.sid: str | None = None
        self.conns: list[Conn] = []
        self._next = 0
        self._head = b""

    def _make_head(self) -> bytes:
        head = (
            f"POST {self.path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        )
        if self.sid is not None:
            head += f"Mcp-Session-Id: {self.sid}\r\nMcp-Protocol-Version: {PROTOCOL_VERSION}\r\n"
        return head.encode()

    async def open(self, connections: int = 1) -> Session:
        self.conns = [
            await Conn(self.host, self.port, self.path).open() for _ in range(connections)
        ]
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
        self._head = self._make_head()
        await self.conns[0].post(
            self._head, b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
        )
        return self

    def close(self) -> None:
        for c in self.conns:
            c.close()

    async def call(self, method: str, params: dict[str, Any], conn: int = 0) -> dict[str, Any]:
        self._next += 1
        rid = self._next
        body = _dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode()
        status, headers, data = await self.conns[conn].post(self._head, body)
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
            if status != 200:
                raise RuntimeError(f"{method}: HTTP {status}: {data[:200]!r}")
            msg = _loads(data)
        if "error" in msg:
            raise RpcError(msg["error"])
        return msg["result"]

    async def task_call(
        self, seconds: float, conn: int = 0, ttl: int = 3_600_000
    ) -> dict[str, Any]:
        """Task-augmented ``slow_compute``; returns the ``task`` of ``CreateTaskResult``."""
        res = await self.call(
            "tools/call",
            {"name": "slow_compute", "arguments": {"seconds": seconds}, "task": {"ttl": ttl}},
            conn,
        )
        return res["task"]
