"""The listeners hold against slow and numerous clients, and a client's address is its
socket's (R-SEC-1, R-SEC-4).

Against the example server as a real subprocess on loopback, counts and times bounded:

- slow bodies (R.U.D.Y.) from one address, more connections than the process has
  descriptors: the address's cap refuses the extra ones at once (a bare HTTP 429), the
  held ones are closed by the minimum body rate or the whole-request deadline, and another
  address is served throughout; the log says so in a line per kind, not per connection;
- the operators' port under a flood of request heads sent a line at a time: closed by the
  head deadline, its connections counted with the MCP port's against the same caps, and
  ``/metrics`` answered throughout;
- ``X-Forwarded-For`` is ignored unless the proxy is named (``--forwarded-allow-ips``):
  a task's anonymous owner (R-SEC-1) and the per-requestor session cap (R-SEC-4) are the
  socket's address, whatever the header says.

The listener tests are the same through either front door (``door_agnostic``); the
ownership test runs through both. Client hosts other than 127.0.0.1 are other loopback
addresses (127.0.0.2, ...): the whole 127/8 is the loopback on Linux.
"""

from __future__ import annotations

import json
import logging
import secrets
import select
import socket
import threading
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from mcp_tasks.examples import server as example
from mcp_tasks.runtime.http.slow_clients import (
    ConnectionCaps,
    ThrottledFilter,
    default_max_connections,
    trusted_addresses,
)
from testkit.ops import ALICE, METRICS_TOKEN, OpsServer
from testkit.sec_harness import (
    SOAK_REPORT,
    HttpServer,
    RawHttp,
    error_of,
    init_request,
    read_response,
)
from testkit.wait import until

ATTACKER = "127.0.0.2"
BYSTANDER = "127.0.0.3"
ACCEPT = "application/json, text/event-stream"


class RawConn:
    """One client connection by hand, from ``source``: what it sent first, what came back."""

    def __init__(self, port: int, source: str, first: bytes) -> None:
        self.sock = socket.socket()
        self.sock.bind((source, 0))
        self.sock.settimeout(30)
        self.sock.connect(("127.0.0.1", port))
        self.data = b""
        self.closed = False
        self.send(first)

    def send(self, data: bytes) -> None:
        try:
            self.sock.sendall(data)
        except OSError:
            pass  # closed by the server: poll() tells

    def poll(self) -> bool:
        """Whether the server has closed it (reading what it sent meanwhile)."""
        while not self.closed:
            if not select.select([self.sock], [], [], 0)[0]:
                return False  # nothing to read, not closed
            try:
                chunk = self.sock.recv(65536)
            except OSError:  # reset: the bytes before it were read already
                chunk = b""
            self.data += chunk
            self.closed = not chunk
        return True

    def refused(self, status: int) -> bool:
        return self.data.startswith(f"HTTP/1.1 {status} ".encode())

    def close(self) -> None:
        self.sock.close()


def _body_head(port: int, length: int) -> bytes:
    return (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: {ACCEPT}\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


def _served(url: str, local: str) -> bool:
    """An ``initialize`` and a ``tools/call`` from ``local`` answered."""
    with RawHttp(url, local_address=local, timeout=30) as client:
        got = client.ok("tools/call", {"name": "greet", "arguments": {"name": local}})
    return bool(got["content"][0]["text"] == f"Hello, {local}!")


def _slow_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if "slow_clients" in line]


@pytest.fixture
def conns() -> Iterator[list[RawConn]]:
    """The test's raw connections, closed at its end."""
    opened: list[RawConn] = []
    yield opened
    for conn in opened:
        conn.close()


# --------------------------------------------------------------------------- slow bodies


@pytest.mark.door_agnostic
def test_slow_bodies_past_the_descriptor_limit_leave_others_served(
    server_factory: Callable[..., HttpServer], conns: list[RawConn]
) -> None:
    """R-SEC-4: 300 connections from one address, more than the server's 256 descriptors,
    each declaring a 4 MB body: the address's default cap (half the connections the
    descriptor limit leaves) takes the first, the others are answered 429 and closed at
    once; the held bodies stalled after a byte are closed by the minimum rate, those sent
    steadily but never finished by the whole-request deadline; another address completes
    ``initialize`` and a ``tools/call`` all along, and the log has a line per kind."""
    fd_limit = 256
    server = server_factory(
        "--request-timeout", "8", "--min-body-rate", "1000/3", fd_limit=fd_limit
    )
    per_address = default_max_connections(fd_limit) // 2
    head = _body_head(server.port, 4_000_000) + b"{"
    steady = [RawConn(server.port, ATTACKER, head) for _ in range(4)]
    stalled = [RawConn(server.port, ATTACKER, head) for _ in range(fd_limit + 40)]
    everyone = steady + stalled
    conns.extend(everyone)
    rounds: list[int] = []
    stop = threading.Event()

    def send_steadily() -> None:  # 800 bytes a second each: above the minimum rate
        while not stop.wait(0.25):
            for conn in steady:
                conn.send(b" " * 200)

    def one_round() -> bool:
        assert _served(server.url, BYSTANDER), "the other address is served"
        rounds.append(sum(not conn.poll() for conn in everyone))
        return rounds[-1] == 0

    sender = threading.Thread(target=send_steadily, daemon=True)
    sender.start()
    try:
        until(one_round, 60, interval=0.5, what="every slow body closed")
    finally:
        stop.set()
        sender.join(10)
    refused = [conn for conn in everyone if conn.refused(429)]
    assert len(refused) == len(everyone) - per_address, (len(refused), per_address)
    assert all(not conn.data for conn in steady)  # held, then closed without an answer
    log = server.log()
    assert "request body under 1000 bytes in 3 s" in log, log[-3000:]
    assert "request not complete in 8 s" in log, log[-3000:]
    assert f"refused connections: over {per_address} per client address" in log
    assert len(_slow_lines(log)) <= 4, _slow_lines(log)
    SOAK_REPORT.append(
        f"slow bodies: {len(everyone)} from one address at a {fd_limit}-descriptor limit:"
        f" {len(refused)} refused at once, the rest closed in {len(rounds)} rounds,"
        f" {len(rounds)} of {len(rounds)} bystander initialize+call served"
    )


@pytest.mark.door_agnostic
def test_a_bad_host_on_abandoned_bodies_is_one_line(
    server_factory: Callable[..., HttpServer], conns: list[RawConn]
) -> None:
    """The SDK's warning about a bad ``Host`` header, written when an abandoned body reaches
    its check, is logged once per period however many bodies are abandoned."""
    server = server_factory()
    head = _body_head(server.port, 4_000_000).replace(
        f"Host: 127.0.0.1:{server.port}".encode(), b"Host: evil.example"
    )
    batch = [RawConn(server.port, ATTACKER, head + b"{") for _ in range(30)]
    conns.extend(batch)
    for conn in batch:
        conn.sock.shutdown(socket.SHUT_WR)  # the client gives up on its body
    until(lambda: all(conn.poll() for conn in batch), what="the abandoned bodies closed")
    until(lambda: "Invalid Host header" in server.log(), what="the bad Host reported")
    assert _served(server.url, BYSTANDER)
    lines = [line for line in server.log().splitlines() if "Invalid Host header" in line]
    assert len(lines) == 1, lines


# --------------------------------------------------------------------------- operators' port


def _metrics_answered(ops_url: str) -> bool:
    request = urllib.request.Request(
        ops_url + "/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return bool(response.status == 200)


@pytest.mark.door_agnostic
def test_ops_port_slow_heads_are_closed_and_share_the_caps(
    ops_servers: Callable[..., OpsServer], conns: list[RawConn]
) -> None:
    """The ``--ops`` listener has the MCP port's deadlines and caps: 60 connections from one
    address sending a request head one line at a time fill its cap of 40 (the rest refused
    429), which also refuses that address on the MCP port (one count for both); they are
    closed by the head deadline while ``/metrics`` answers throughout, and then the address
    is served again on the MCP port."""
    server = ops_servers("--header-timeout", "4", "--max-connections-per-address", "40")
    heads = [RawConn(server.ops_port, ATTACKER, b"GET /metrics HTTP/1.1\r\n") for _ in range(60)]
    conns.extend(heads)
    # the last 20 refused: the 40 before them (the listener accepts in order) are held
    until(lambda: sum(conn.poll() and conn.refused(429) for conn in heads) == 20)
    shared = RawConn(server.port, ATTACKER, b"")
    conns.append(shared)
    assert until(shared.poll) and shared.refused(429), shared.data
    lines = iter(range(10_000))

    def one_round() -> bool:
        line = next(lines)
        for conn in heads:  # a header line each half second: the head never ends
            conn.send(f"X-Slow-{line}: y\r\n".encode())
        assert _metrics_answered(server.ops_url)
        return all(conn.poll() for conn in heads)

    until(one_round, 60, interval=0.5, what="every slow head closed")
    assert sum(conn.refused(429) for conn in heads) == 20
    assert "request head not complete in 4 s" in server.log(), server.log()[-3000:]
    assert len(_slow_lines(server.log())) <= 3, _slow_lines(server.log())
    headers = {"Accept": ACCEPT, "Authorization": f"Bearer {ALICE}"}
    with httpx.Client(transport=httpx.HTTPTransport(local_address=ATTACKER), timeout=30) as c:
        assert c.post(server.url, headers=headers, json=init_request()).status_code == 200


# --------------------------------------------------------------------------- client addresses


def _forwarded(client: RawHttp, address: str | None) -> RawHttp:
    if address is None:
        client.headers.pop("X-Forwarded-For", None)
    else:
        client.headers["X-Forwarded-For"] = address
    return client


def test_forwarded_for_is_ignored_unless_the_proxy_is_named(
    server_factory: Callable[..., HttpServer],
) -> None:
    """R-SEC-1: stateless without tokens, a task is its client address's. By default the
    address is the socket's: a task created with ``X-Forwarded-For: 10.0.0.1`` is found by
    a request without it from the same socket address (the header changed nothing). With
    ``--forwarded-allow-ips 127.0.0.1`` the header names the client: without it the task is
    unknown (exactly the unknown id's error), with it the task is found."""
    plain = server_factory("--stateless")
    with RawHttp(plain.url, stateless=True) as client:
        tid = _forwarded(client, "10.0.0.1").create("slow_compute", {"seconds": 0})
        got = _forwarded(client, None).ok("tasks/get", {"taskId": tid})
        assert got["taskId"] == tid
        got = _forwarded(client, "10.9.9.9").ok("tasks/get", {"taskId": tid})
        assert got["taskId"] == tid

    behind = server_factory("--stateless", "--forwarded-allow-ips", "127.0.0.1")
    with RawHttp(behind.url, stateless=True) as client:
        tid = _forwarded(client, "10.0.0.1").create("slow_compute", {"seconds": 0})
        assert _forwarded(client, "10.0.0.1").ok("tasks/get", {"taskId": tid})["taskId"] == tid
        _forwarded(client, None)
        unknown = error_of(client.call("tasks/get", {"taskId": secrets.token_urlsafe(16)}))
        assert error_of(client.call("tasks/get", {"taskId": tid})) == unknown
        assert (
            error_of(_forwarded(client, "10.0.0.2").call("tasks/get", {"taskId": tid})) == unknown
        )


@pytest.mark.door_agnostic
def test_rotating_forwarded_for_does_not_open_more_sessions(
    server_factory: Callable[..., HttpServer],
) -> None:
    """R-SEC-4: the per-requestor session cap of a client without a token is its socket
    address's: a new ``X-Forwarded-For`` on each ``initialize`` opens no more than the cap."""
    server = server_factory("--max-sessions-per-requestor", "3")
    statuses = []
    with httpx.Client(timeout=30) as http:
        for i in range(6):
            headers = {"Accept": ACCEPT, "X-Forwarded-For": f"10.0.0.{i + 1}"}
            statuses.append(http.post(server.url, headers=headers, json=init_request()).status_code)
    assert statuses == [200, 200, 200, 429, 429, 429], statuses


# --------------------------------------------------------------------------- in process


def test_connection_caps_count_in_all_and_per_address() -> None:
    caps = ConnectionCaps(total=4, per_address=2, exempt=trusted_addresses("10.0.0.0/8"))
    assert [caps.admit("a"), caps.admit("a"), caps.admit("a")] == [None, None, 429]
    assert [caps.admit("10.1.1.1"), caps.admit("10.1.1.1")] == [None, None]  # a proxy's
    assert caps.admit("b") == 503 and caps.open == 4
    caps.release("10.1.1.1")
    assert caps.admit("b") is None
    caps.release("a")
    assert caps.held_by("a") == 1 and caps.admit("a") is None
    with pytest.raises(ValueError):
        ConnectionCaps(total=0, per_address=1)


def test_connection_flags_and_their_defaults() -> None:
    """``--max-connections`` defaults from the descriptor limit, the per-address cap to at
    most half of it; ``--min-body-rate 0`` turns the minimum off; mistakes exit 2."""
    args = example._parse_args(["--http", "127.0.0.1:1"])
    assert args.max_connections == default_max_connections()
    assert args.max_connections_per_address == min(256, args.max_connections // 2)
    assert args.body_rate == (10240, 10.0) and args.request_timeout == 60
    assert args.trusted_proxies is None
    protocol = example.http_protocol(args)
    assert protocol.deadlines.caps.total == args.max_connections
    off = example._parse_args(["--http", "127.0.0.1:1", "--min-body-rate", "0"])
    assert off.body_rate is None
    assert default_max_connections(1024) == 896 and default_max_connections(256) == 192
    assert default_max_connections(100) == 50
    for bad in (
        ["--min-body-rate", "fast"],
        ["--min-body-rate", "10/0"],
        ["--max-connections", "0"],
        ["--max-connections", str(10**9)],
        ["--max-connections-per-address", "0"],
        ["--forwarded-allow-ips", "proxy.local"],
        ["--request-timeout", "0"],
    ):
        with pytest.raises(SystemExit):
            example._parse_args(["--http", "127.0.0.1:1", *bad])
    trusted = trusted_addresses("127.0.0.1, 10.0.0.0/8,::1")
    assert trusted("10.2.3.4") and trusted("::1") and not trusted("127.0.0.2")
    assert trusted_addresses("*")("anything")


def test_throttled_filter_lets_one_warning_of_a_kind_through() -> None:
    throttle = ThrottledFilter(every=3600)
    records = [
        logging.LogRecord(
            "x", logging.WARNING, __file__, 1, f"Invalid Host header: h{i}", None, None
        )
        for i in range(5)
    ]
    passed = [throttle.filter(r) for r in records]
    assert passed == [True, False, False, False, False]
    error = logging.LogRecord("x", logging.ERROR, __file__, 1, "boom", None, None)
    assert throttle.filter(error)
    throttle._next.clear()  # the period over: the next one says how many were held back
    assert throttle.filter(records[0])
    assert records[0].getMessage() == "Invalid Host header: h0 (4 more since the last report)"


# --------------------------------------------------------------------------- slow clients

SLOW = ("--header-timeout", "1", "--body-timeout", "1", "--send-timeout", "1")


def _connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    return sock


def _closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closed ``sock`` (reads what it sent until then)."""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def _head(port: int, length: int) -> bytes:
    return (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


def test_slow_heads_and_bodies_are_closed(server_factory: Callable[..., HttpServer]) -> None:
    """A connection whose request head or body never completes is closed at its deadline
    (slowloris), and the others are served meanwhile; the count is reported."""
    server = server_factory(*SLOW)
    heads = [_connect(server.port) for _ in range(20)]
    for sock in heads[:10]:
        sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127")  # a head that never ends
    bodies = [_connect(server.port) for _ in range(20)]
    for sock in bodies:
        sock.sendall(_head(server.port, 1000) + b'{"jsonrpc"')  # a body that never ends
    with RawHttp(server.url) as fresh:  # served while they hang
        assert fresh.ok("tools/list", {})["tools"]
    closed = sum(_closed_by_server(s) for s in [*heads, *bodies])
    assert closed == 40, closed
    for sock in [*heads, *bodies]:
        sock.close()
    SOAK_REPORT.append(f"slowloris [{server.front_door}]: 40 of 40 stalled connections closed")


def test_a_slow_head_after_a_kept_alive_answer_is_closed(
    server_factory: Callable[..., HttpServer],
) -> None:
    """A kept-alive connection that begins its next request's head and never ends it is
    closed at the head's deadline, like a new connection's (uvicorn's keep-alive timer
    stops at the first byte)."""
    server = server_factory(*SLOW)
    sock = _connect(server.port)
    sock.sendall(f"GET /nowhere HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n\r\n".encode())
    assert read_response(sock)[0].startswith(b"HTTP/1.1 404"), "answered, connection kept"
    sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127")  # a head that never ends
    assert _closed_by_server(sock)
    sock.close()


def _kernel_send_buffer_max() -> int:
    """The most a TCP socket's send buffer grows to here (``tcp_wmem``'s maximum): the bytes
    the kernel can take off the server before its own buffer fills and writing pauses."""
    try:
        return int(Path("/proc/sys/net/ipv4/tcp_wmem").read_text().split()[2])
    except (OSError, IndexError, ValueError):
        return 4 * 1024 * 1024


def test_an_answer_never_read_is_dropped(server_factory: Callable[..., HttpServer]) -> None:
    """A client that never reads its (large) answer does not pin it: the connection is
    dropped at the send deadline, its unsent bytes with it, and the server goes on serving."""
    server = server_factory(*SLOW, "--stateless")
    label = "z" * 1_500_000  # a 3 MB answer (the text twice: content, structured)
    with RawHttp(server.url, stateless=True) as owner:
        tid = owner.create("slow_compute", {"seconds": 0, "label": label})
        owner.wait(tid)
        full = len(owner.post_raw(json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "tasks/result", "params": {"taskId": tid}}
        )).body)  # fmt: skip
    # The kernel takes about 3 MB of a 4 MiB send buffer on loopback, and more where its
    # buffers are larger: one answer can fit whole and never pause the server's writing. So
    # the request goes out pipelined, until the answers are twice what the kernel can hold.
    copies = 2 * _kernel_send_buffer_max() // full + 2
    sock = socket.socket()
    sock.settimeout(30)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: a small window
    sock.connect(("127.0.0.1", server.port))
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 2, "method": "tasks/result", "params": {"taskId": tid}}
    ).encode()
    head = _head(server.port, len(body)).replace(
        b"Content-Length", b"mcp-protocol-version: 2025-11-25\r\nContent-Length"
    )
    sock.sendall((head + body) * copies)
    until(server.log, satisfied=lambda log: "response not read for 1 s" in log,
          what="the unread answer dropped")  # fmt: skip
    got = 0
    try:
        while chunk := sock.recv(1 << 20):
            got += len(chunk)
    except (ConnectionResetError, TimeoutError):
        pass
    sock.close()
    assert got < copies * full, (got, copies, full)
    with RawHttp(server.url, stateless=True) as again:
        assert again.ok("tools/list", {})["tools"]


def test_aborted_bodies_log_one_line_and_no_traceback(
    server_factory: Callable[..., HttpServer],
) -> None:
    """A client that leaves in the middle of its body is nobody to answer: no traceback in
    the log, one throttled line for all of them."""
    server = server_factory()
    for version in (None, "2026-07-28"):
        for _ in range(5):
            sock = _connect(server.port)
            head = _head(server.port, 1000)
            if version:
                head = head.replace(
                    b"Content-Length", f"MCP-Protocol-Version: {version}\r\nContent-Length".encode()
                )
            sock.sendall(head + b'{"jsonrpc"')
            sock.close()
    until(server.log, satisfied=lambda log: "request bodies aborted" in log, what="the report")
    with RawHttp(server.url) as fresh:  # each abort has been handled before this is served
        fresh.ok("tools/list", {})
    log = server.log()
    assert "Traceback" not in log, log[-3000:]
    assert log.count("request bodies aborted") == 1, log


# --------------------------------------------------------------------------- odd results
