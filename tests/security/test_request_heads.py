"""Request heads are bounded on every listener, before anything reads them (R-SEC-4).

A request head (its request line and header fields) is held in memory until it ends, and
read before the app sees the request: before a bearer token is checked, on the MCP port and
on the operators' ``--ops`` port alike. Against the example server as a real subprocess on
loopback, on both HTTP stacks (``httptools``, the default, and ``h11``):

- 10 connections each sending a 100 MiB head (header lines, one endless header value, an
  endless ``Mcp-Session-Id``) are answered HTTP 431 and closed long before they are read
  whole, and the server's resident memory grows by less than 50 MiB meanwhile and after
  they close (it grew by about 1 GiB on the default stack before the limit);
- the limits are exact and alike on both stacks: a head of ``--max-head-bytes`` bytes and
  ``--max-headers`` fields is served, one byte or one field more is refused, the reason in
  the answer and one throttled log line;
- they hold each head, never a connection's: many requests on one kept-alive connection,
  one after another or pipelined in one write, are all served.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

import pytest

from testkit.ops import OpsServer
from testkit.sec_harness import read_response, rss_kb

pytestmark = pytest.mark.door_agnostic  # the listener, not the front door, is tested

STACKS = ("auto", "h11")
#: what one hostile connection offers to send (it is cut off long before)
HEAD_BYTES = 100 << 20
#: the most a connection may push before the server closes it: the limit, the socket
#: buffers of both ends on loopback, one read of the server's, with room to spare
CUT_BY = 16 << 20
#: growth of the server's resident memory allowed while the 10 heads are refused
RSS_GROWTH_KB = 50 << 10
CHUNK = 64 << 10
LINE = b"X-Pad: " + b"a" * 1015 + b"\r\n"  # 1 KiB


def _opening(port: int, path: str, shape: str) -> tuple[bytes, bytes]:
    """The head's first bytes and the chunk repeated after them, for one ``shape``."""
    start = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode()
    if shape == "lines":
        return start, LINE * (CHUNK // len(LINE))
    field = b"X-Big: " if shape == "value" else b"Mcp-Session-Id: "
    return start + field, b"a" * CHUNK


class Flood:
    """One connection sending a ``HEAD_BYTES`` head in chunks until the server cuts it."""

    def __init__(self, port: int, path: str, shape: str) -> None:
        self.first, self.chunk = _opening(port, path, shape)
        self.port = port
        self.sent = 0
        self.answer = b""
        self.cut = False

    def run(self) -> None:
        with socket.create_connection(("127.0.0.1", self.port), timeout=30) as sock:
            try:
                sock.sendall(self.first)
                while self.sent < HEAD_BYTES:
                    sock.sendall(self.chunk)
                    self.sent += len(self.chunk)
            except OSError:
                self.cut = True  # reset, or the pipe broken: closed by the server
            try:
                while len(self.answer) < 4096:
                    got = sock.recv(4096)
                    if not got:
                        self.cut = True
                        break
                    self.answer += got
            except OSError:
                self.cut = True


def _flood(pid: int, port: int, path: str) -> tuple[int, int, list[Flood]]:
    """10 floods at once on ``port``: the server's RSS growth (KiB) at its peak meanwhile,
    and once they are closed; the floods."""
    shapes = ("lines", "value", "session")
    floods = [Flood(port, path, shapes[i % 3]) for i in range(10)]
    base = rss_kb(pid)
    threads = [threading.Thread(target=f.run) for f in floods]
    for t in threads:
        t.start()
    peak = base
    while any(t.is_alive() for t in threads):
        peak = max(peak, rss_kb(pid))
        time.sleep(0.02)
    for t in threads:
        t.join()
    time.sleep(0.5)  # the server's side of the closes
    return max(peak, rss_kb(pid)) - base, rss_kb(pid) - base, floods


@pytest.mark.parametrize("stack", STACKS)
def test_ten_100_mib_heads_are_cut_off_on_both_ports(
    ops_servers: Callable[..., OpsServer], stack: str
) -> None:
    """R-SEC-4: on the MCP port (before the bearer token is read) and on ``--ops``, each of
    10 connections sending a 100 MiB head is answered 431 and closed after a few hundred
    KiB; the server's memory grows by less than 50 MiB, and a request is served after."""
    server = ops_servers("--http-stack", stack)
    assert server.proc is not None
    pid = server.proc.pid
    for port, path in ((server.port, "/mcp"), (server.ops_port, "/metrics")):
        peak, after, floods = _flood(pid, port, path)
        for f in floods:
            assert f.cut and f.sent < CUT_BY, (port, f.sent)
            if f.answer:  # a reset may come before the answer is read
                assert f.answer.startswith(b"HTTP/1.1 431 "), f.answer[:200]
        assert any(f.answer for f in floods)
        assert peak < RSS_GROWTH_KB, f"RSS grew by {peak >> 10} MiB on port {port}"
        assert after < RSS_GROWTH_KB, f"RSS still {after >> 10} MiB up on port {port}"
    assert server.metrics()  # both ports serve afterwards
    assert "refused request heads" in server.log()


def _exchange(port: int, request: bytes) -> bytes:
    """``request`` sent whole; what came back before the server closed or 5 s passed."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(request)
        got = b""
        try:
            while b"\r\n\r\n" not in got or got.startswith(b"HTTP/1.1 431 ") and len(got) < 400:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                got += chunk
        except OSError:
            pass
    return got


def _head(port: int, fields: int, size: int | None = None) -> bytes:
    """A ``GET /healthz`` head (the ops port's, no token needed) with ``fields`` header
    fields, padded to exactly ``size`` bytes when given."""
    lines = [f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode()]
    lines += [f"X-F{i}: v\r\n".encode() for i in range(fields - 1)]
    head = b"".join(lines)
    if size is not None:
        pad = size - len(head) - len(b"X-Pad: \r\n\r\n")
        assert pad > 0
        head += b"X-Pad: " + b"p" * pad + b"\r\n"
    return head + b"\r\n"


@pytest.mark.parametrize("stack", STACKS)
def test_the_limits_are_exact_and_alike_on_both_stacks(
    ops_servers: Callable[..., OpsServer], stack: str
) -> None:
    """R-SEC-4: with ``--max-head-bytes 4096 --max-headers 20``, a head of 4,096 bytes and
    one of 20 fields are served; 4,097 bytes, or 21 fields, are answered 431 naming the
    limit, whole in one read or byte by byte alike."""
    server = ops_servers("--http-stack", stack, "--max-head-bytes", "4096", "--max-headers", "20")
    port = server.ops_port
    assert _exchange(port, _head(port, 19, size=4096)).startswith(b"HTTP/1.1 200 ")
    assert _exchange(port, _head(port, 20)).startswith(b"HTTP/1.1 200 ")
    too_long = _exchange(port, _head(port, 19, size=4097))
    assert too_long.startswith(b"HTTP/1.1 431 "), too_long[:300]
    assert b"over 4096 bytes" in too_long
    too_many = _exchange(port, _head(port, 21))
    assert too_many.startswith(b"HTTP/1.1 431 "), too_many[:300]
    assert b"over 20 header fields" in too_many
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        got = b""
        try:
            for byte in _head(port, 19, size=4097):
                sock.sendall(bytes([byte]))
        except OSError:
            pass
        try:
            got = sock.recv(4096)
        except OSError:
            pass
    assert got.startswith(b"HTTP/1.1 431 "), got[:300]
    assert server.log().count("refused request heads") == 1, server.log()[-2000:]


def _answers(sock: socket.socket, count: int) -> list[bytes]:
    """The status lines of ``count`` answers read from ``sock`` (each has a length)."""
    got, lines = b"", []
    while len(lines) < count:
        head, got = read_response(sock, got)
        lines.append(head.split(b"\r\n", 1)[0])
    return lines


@pytest.mark.parametrize("stack", STACKS)
def test_the_limits_are_per_head_never_per_connection(
    ops_servers: Callable[..., OpsServer], stack: str
) -> None:
    """R-SEC-4: with ``--max-head-bytes 4096``, 100 heads of 3 KiB on one kept-alive
    connection (300 KiB in all), each sent whole after the last answer, then 100 more
    pipelined in one write, are all served."""
    server = ops_servers("--http-stack", stack, "--max-head-bytes", "4096")
    port = server.ops_port
    head = _head(port, 5, size=3072)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        for _ in range(100):
            sock.sendall(head)
            assert _answers(sock, 1) == [b"HTTP/1.1 200 OK"]
        sock.sendall(head * 100)
        assert _answers(sock, 100) == [b"HTTP/1.1 200 OK"] * 100
    assert "refused request heads" not in server.log()
