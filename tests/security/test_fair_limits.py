"""Nothing of one requestor reachable by another, no requestor locking another out.

Against the example server as a real subprocess on loopback, through both front doors
(``front_door``), both faces where the rule is a face's, counts and times bounded:

- stateless HTTP without tokens (R-SEC-2): ``tasks/list`` neither declared nor served, and
  a client at another address gets for another's task exactly the answer of an unknown id
  on every ``tasks/*`` method of both faces (R-SEC-1, X-SEC-1, X-SEC-2);
- what one requestor keeps (R-SEC-3, R-SEC-4): creation counts against the rate limit, the
  tasks and result bytes kept per requestor are capped (oldest finished dropped first),
  one result's size is capped;
- sessions (R-SEC-4): a per-requestor cap under the SDK's global one, the global cap and
  the idle timeout as flags;
- anonymous clients of the extension face: their limits are their address's;
- slow clients: request heads and bodies that never complete, answers never read, bodies
  aborted (one log line, no traceback);
- a result that is not valid Unicode is still answered (no HTTP 500).

Client hosts other than 127.0.0.1 are other loopback addresses (127.0.0.2, ...): the whole
127/8 is the loopback on Linux.
"""

from __future__ import annotations

import json
import secrets
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from testkit.doors import pinned
from testkit.ext_wire import ExtClient
from testkit.sec_harness import SOAK_REPORT, HttpServer, RawHttp, assert_no_leak, init_request
from testkit.wait import until

OTHER_HOST = "127.0.0.2"
THIRD_HOST = "127.0.0.3"
TASK_METHODS_CORE = ("tasks/get", "tasks/result", "tasks/cancel")
TASK_METHODS_EXT = ("tasks/get", "tasks/update", "tasks/cancel")
EXPIRED = "Failed to retrieve task: Task has expired"


def _error(answer: dict[str, Any]) -> dict[str, Any]:
    assert "error" in answer, f"answered where it must be refused: {answer}"
    err: dict[str, Any] = answer["error"]
    return err


def _ext_params(method: str, task_id: str) -> dict[str, Any]:
    if method == "tasks/update":
        return {"taskId": task_id, "inputResponses": {"k": {"action": "decline"}}}
    return {"taskId": task_id}


def _ext_task(client: ExtClient, tool: str, **arguments: Any) -> str:
    created = client.result("tools/call", {"name": tool, "arguments": arguments})
    assert created.get("resultType") == "task", created
    return str(created["taskId"])


# --------------------------------------------------------------------------- isolation


def test_stateless_without_tokens_reaches_nothing_of_another(
    server_factory: Callable[..., HttpServer],
) -> None:
    """R-SEC-2, R-SEC-1, X-SEC-2: stateless HTTP without tokens. ``tasks/list`` is not
    declared and answers -32601 like any method not served, to every client; from another
    address every ``tasks/*`` method of both faces on a's task answers exactly as on an
    unknown id; a's tasks are untouched and its own result intact."""
    server = server_factory("--stateless")
    a = RawHttp(server.url, stateless=True)
    b = RawHttp(server.url, stateless=True, local_address=OTHER_HOST)
    ext_a = ExtClient(server.url)
    ext_b = ExtClient(server.url, local_address=OTHER_HOST)
    with a, b, ext_a, ext_b:
        caps = a.http.post(server.url, headers=a.headers, json=init_request()).text
        assert '"list"' not in caps, caps
        secret = a.create("slow_compute", {"seconds": 0, "label": "secret"})
        working = a.create("slow_compute", {"seconds": 60, "label": "secret"})
        a.wait(secret)
        for client in (a, b):
            err = _error(client.call("tasks/list", {}))
            assert err["code"] == -32601, err
        unknown = secrets.token_urlsafe(16)
        for method in TASK_METHODS_CORE:
            ref = _error(b.call(method, {"taskId": unknown}))
            assert ref["code"] == -32602 and "not found" in ref["message"].lower(), ref
            for tid in (secret, working):
                assert _error(b.call(method, {"taskId": tid})) == ref, (method, tid)

        ext_secret = _ext_task(ext_a, "slow_compute", seconds=0, label="secret")
        ext_working = _ext_task(ext_a, "slow_compute", seconds=60, label="secret")
        ext_a.wait(ext_secret)
        assert _error(ext_b.send("tasks/list", {}))["code"] == -32601
        for method in TASK_METHODS_EXT:
            ref = _error(ext_b.send(method, _ext_params(method, unknown)))
            for tid in (ext_secret, ext_working, secret):
                got = _error(ext_b.send(method, _ext_params(method, tid)))
                assert got == ref, (method, tid, got, ref)

        assert a.ok("tasks/get", {"taskId": working})["status"] == "working"
        done = a.ok("tasks/result", {"taskId": secret})
        assert done["content"][0]["text"] == "done after 0s (secret)"
        assert ext_a.result("tasks/get", {"taskId": ext_working})["status"] == "working"
        assert "secret" in json.dumps(ext_a.result("tasks/get", {"taskId": ext_secret}))
        a.ok("tasks/cancel", {"taskId": working})
        ext_a.result("tasks/cancel", {"taskId": ext_working})


# --------------------------------------------------------------------------- bounded per requestor


def test_creation_counts_against_the_rate_limit(
    server_factory: Callable[..., HttpServer], tokens_file: Path
) -> None:
    """R-SEC-3: a task creation is a task operation; the limit is the requestor's, across
    both faces, and another requestor is never refused for it."""
    server = server_factory("--tokens", str(tokens_file), "--rate-limit", "6/600")
    alice = RawHttp(server.url, token="tok-alice")
    bob = RawHttp(server.url, token="tok-bob")
    ext_alice = ExtClient(server.url, headers={"Authorization": "Bearer tok-alice"})
    with alice, bob, ext_alice:
        for _ in range(3):
            alice.create("failing_job", {})
        for _ in range(3):
            _ext_task(ext_alice, "failing_job")
        refused = _error(
            alice.call("tools/call", {"name": "failing_job", "arguments": {}, "task": {}})
        )
        assert refused["code"] == -32000 and "Rate limit" in refused["message"], refused
        ext_refused = _error(ext_alice.send("tools/call", {"name": "failing_job", "arguments": {}}))
        assert ext_refused == refused
        bob.create("failing_job", {})  # bob's own budget


def _fail_and_wait(client: RawHttp) -> str:
    tid = client.create("failing_job", {})
    client.wait(tid)
    return tid


def test_tasks_kept_per_requestor_are_capped(
    server_factory: Callable[..., HttpServer], tokens_file: Path
) -> None:
    """R-SEC-4: at ``--max-tasks`` a requestor's oldest finished task is dropped to make
    room (it answers "Task has expired" from then on, on its own face); the newest are
    kept; another requestor's tasks are not touched."""
    server = server_factory(
        "--tokens", str(tokens_file), "--max-active", "4", "--max-tasks", "8",
        engine_config={"rate_limit_calls": 100_000},
    )  # fmt: skip
    alice = RawHttp(server.url, token="tok-alice")
    bob = RawHttp(server.url, token="tok-bob")
    ext_alice = ExtClient(server.url, headers={"Authorization": "Bearer tok-alice"})
    with alice, bob, ext_alice:
        bobs = [_fail_and_wait(bob) for _ in range(3)]
        made = [_fail_and_wait(alice) for _ in range(20)]
        listed = [t["taskId"] for t in alice.list_all()]
        assert listed == made[-8:], (listed, made)
        for tid in made[:12]:
            err = _error(alice.call("tasks/get", {"taskId": tid}))
            assert err["message"] == EXPIRED, err
        assert [t["taskId"] for t in bob.list_all()] == bobs

        ext_made = []
        for _ in range(10):
            tid = _ext_task(ext_alice, "failing_job")
            ext_alice.wait(tid)
            ext_made.append(tid)
        for tid in ext_made[:2]:  # the one cap counts both faces' tasks
            assert _error(ext_alice.send("tasks/get", {"taskId": tid}))["message"] == EXPIRED
        assert alice.list_all() == []  # the core face's were older: dropped first
        for tid in ext_made[2:]:
            assert ext_alice.result("tasks/get", {"taskId": tid})["status"] in {
                "failed",
                "completed",
            }


def test_result_bytes_are_capped(
    server_factory: Callable[..., HttpServer], tokens_file: Path
) -> None:
    """R-SEC-4: one result over ``--max-result-bytes`` fails its task with a clear error and
    is not kept; past ``--max-result-bytes-per-requestor`` the requestor's oldest finished
    tasks are dropped; both faces."""
    server = server_factory(
        "--tokens", str(tokens_file), "--max-result-bytes", "100000",
        "--max-result-bytes-per-requestor", "300000",
    )  # fmt: skip
    alice = RawHttp(server.url, token="tok-alice")
    ext_alice = ExtClient(server.url, headers={"Authorization": "Bearer tok-alice"})
    with alice, ext_alice:
        big = alice.create("slow_compute", {"seconds": 0, "label": "x" * 150_000})
        assert alice.wait(big)["status"] == "failed"
        err = _error(alice.call("tasks/result", {"taskId": big}))
        assert err["code"] == -32000 and "Task result too large" in err["message"], err
        assert "at most 100000 bytes" in err["message"], err

        ext_big = _ext_task(ext_alice, "slow_compute", seconds=0, label="y" * 150_000)
        failed = ext_alice.wait(ext_big)
        assert failed["status"] == "failed" and "too large" in json.dumps(failed), failed

        kept = []
        for i in range(8):  # 8 x ~60 KB (the text twice: content, structured) > 300 KB
            tid = alice.create("slow_compute", {"seconds": 0, "label": str(i) * 30_000})
            alice.wait(tid)
            kept.append(tid)
        for tid in kept[:3]:
            assert _error(alice.call("tasks/result", {"taskId": tid}))["message"] == EXPIRED
        for i, tid in enumerate(kept[-4:], start=4):
            text = alice.ok("tasks/result", {"taskId": tid})["content"][0]["text"]
            assert text.endswith(f"({str(i) * 30_000})")


# --------------------------------------------------------------------------- sessions


def _open(url: str, token: str | None = None, local: str | None = None) -> httpx.Response:
    headers = {"Accept": "application/json, text/event-stream"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    transport = httpx.HTTPTransport(local_address=local) if local else None
    with httpx.Client(timeout=30, transport=transport) as http:
        return http.post(url, headers=headers, json=init_request())


def _close(url: str, response: httpx.Response, token: str | None = None) -> None:
    headers = {"mcp-session-id": response.headers["mcp-session-id"]}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    httpx.delete(url, headers=headers, timeout=30)


def test_sessions_per_requestor_under_the_global_cap(
    server_factory: Callable[..., HttpServer], tokens_file: Path
) -> None:
    """R-SEC-4: alice at ``--max-sessions-per-requestor`` gets HTTP 429 and a JSON-RPC
    error naming the cap; bob still opens sessions until the global ``--max-sessions``
    (the SDK's 503); a session alice ends makes room for her again."""
    server = server_factory(
        "--tokens", str(tokens_file), "--max-sessions-per-requestor", "3", "--max-sessions", "5"
    )
    alices = [_open(server.url, "tok-alice") for _ in range(3)]
    assert all(r.status_code == 200 for r in alices), [r.status_code for r in alices]
    refused = _open(server.url, "tok-alice")
    assert refused.status_code == 429, refused.text
    err = refused.json()["error"]
    assert err["code"] == -32000 and "at most 3 per requestor" in err["message"], err
    bobs = [_open(server.url, "tok-bob") for _ in range(2)]
    assert all(r.status_code == 200 for r in bobs), [r.text for r in bobs]
    assert _open(server.url, "tok-carol").status_code == 503  # the global cap, 5 open
    _close(server.url, alices[0], "tok-alice")
    assert _open(server.url, "tok-alice").status_code == 200


def test_sessions_without_tokens_are_capped_per_address(
    server_factory: Callable[..., HttpServer],
) -> None:
    """Without tokens the session cap is per client address: one address at its cap never
    refuses another."""
    server = server_factory("--max-sessions-per-requestor", "2")
    assert [_open(server.url).status_code for _ in range(3)] == [200, 200, 429]
    assert _open(server.url, local=OTHER_HOST).status_code == 200


def test_session_idle_timeout_flag(server_factory: Callable[..., HttpServer]) -> None:
    """``--session-idle-timeout``: an idle session ends (its id answers 404) and no longer
    counts against its requestor's cap."""
    server = server_factory("--session-idle-timeout", "0.5", "--max-sessions-per-requestor", "1")
    first = _open(server.url)
    assert first.status_code == 200
    sid = first.headers["mcp-session-id"]

    def probe() -> int:
        headers = {"mcp-session-id": sid, "Accept": "application/json, text/event-stream"}
        body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        return httpx.post(server.url, headers=headers, json=body, timeout=30).status_code

    # each probe is a request: they come further apart than the idle timeout
    until(probe, satisfied=lambda status: status == 404, interval=1.0, what="the idle session ends")
    assert _open(server.url).status_code == 200


# --------------------------------------------------------------------------- anonymous


def test_anonymous_extension_clients_have_their_own_limits(
    server_factory: Callable[..., HttpServer],
) -> None:
    """X-SEC-2, R-SEC-3, R-SEC-4: without tokens an extension client's requestor is its
    address: one address at its active-task cap or rate limit never refuses another."""
    server = server_factory("--max-active", "3", "--rate-limit", "40/600")
    a = ExtClient(server.url)
    b = ExtClient(server.url, local_address=OTHER_HOST)
    c = ExtClient(server.url, local_address=THIRD_HOST)
    with a, b, c:
        held = [_ext_task(a, "slow_compute", seconds=60) for _ in range(3)]
        err = _error(a.send("tools/call", {"name": "slow_compute", "arguments": {"seconds": 60}}))
        assert err["code"] == -32000 and "Too many active tasks" in err["message"], err
        mine = _ext_task(b, "slow_compute", seconds=0)
        answers = [a.send("tasks/get", {"taskId": held[0]}) for _ in range(40)]
        limited = [m for m in answers if "error" in m]
        assert limited and "Rate limit" in limited[-1]["error"]["message"], answers[-1]
        assert b.wait(mine)["status"] == "completed"
        assert c.result("tasks/get", {"taskId": _ext_task(c, "slow_compute", seconds=0)})


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


def _read_response(sock: socket.socket) -> bytes:
    """One whole HTTP response (head and Content-Length body) from ``sock``."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += sock.recv(65536)
    return head


def test_a_slow_head_after_a_kept_alive_answer_is_closed(
    server_factory: Callable[..., HttpServer],
) -> None:
    """A kept-alive connection that begins its next request's head and never ends it is
    closed at the head's deadline, like a new connection's (uvicorn's keep-alive timer
    stops at the first byte)."""
    server = server_factory(*SLOW)
    sock = _connect(server.port)
    sock.sendall(f"GET /nowhere HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n\r\n".encode())
    assert _read_response(sock).startswith(b"HTTP/1.1 404"), "answered, connection kept"
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


def test_a_result_that_is_not_unicode_is_answered(
    server_factory: Callable[..., HttpServer],
) -> None:
    """A tool result holding a lone surrogate (``"\\ud800"`` arrived as a JSON escape, which
    the extension's parser takes) is answered by ``tasks/get``, the surrogate escaped again,
    never HTTP 500; the 2025-11-25 face's parser refuses such a request (-32700)."""
    server = server_factory()
    ext = ExtClient(server.url)
    with ext, RawHttp(server.url) as core:
        tid = _ext_task(ext, "slow_compute", seconds=0, label="\ud800")
        task = ext.wait(tid)
        assert task["status"] == "completed", task
        assert task["result"]["content"][0]["text"] == "done after 0s (\ud800)", task
        assert_no_leak(json.dumps(task))
        call = {"name": "slow_compute", "arguments": {"label": "\ud800"}, "task": {}}
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call})
        refused = core.post_raw(body)
        assert refused.messages[0]["error"]["code"] == -32700, refused


@pytest.mark.parametrize("flag", ["--max-sessions", "--max-sessions-per-requestor"])
def test_session_flags_refuse_nonsense(flag: str, tmp_path: Path) -> None:
    """A cap of 0 is refused at start, naming the flag."""
    import subprocess

    from testkit.example_server import server_command
    from testkit.procs import python_env

    out = subprocess.run(
        server_command("--http", "127.0.0.1:1", flag, "0"),
        capture_output=True, text=True, timeout=120, env=python_env(),
    )  # fmt: skip
    assert out.returncode == 2 and flag in out.stderr, out.stderr


# --------------------------------------------------------------------------- the wire's corners


def test_bad_accept_on_the_extension_face_has_a_body(
    server_factory: Callable[..., HttpServer],
) -> None:
    """A bad ``Accept`` on the 2026-07-28 face: HTTP 406 with a JSON-RPC ``-32600`` body,
    not an empty one."""
    server = server_factory()
    with ExtClient(server.url) as ext:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        head = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}
        response = ext.http.post(server.url, json=body, headers={**head, "Accept": "text/plain"})
    assert response.status_code == 406, response.text
    assert response.json()["error"]["code"] == -32600, response.text


def test_an_mcp_name_that_does_not_decode_is_a_mismatch(
    server_factory: Callable[..., HttpServer],
) -> None:
    """X-HTTP-4: an ``Mcp-Name`` in the base64 form that does not decode names no task: the
    request is refused as a mismatch (-32020), never served as if the header were absent."""
    server = server_factory()
    with ExtClient(server.url) as ext:
        tid = _ext_task(ext, "slow_compute", seconds=0)
        for method in TASK_METHODS_EXT:
            broken = {"Mcp-Name": "=?base64?!!!?="}
            err = _error(ext.send(method, _ext_params(method, tid), headers=broken))
            assert err["code"] == -32020, (method, err)
        assert ext.wait(tid)["status"] == "completed"


@pinned("endpoint")  # the SDK's pipeline takes these for notifications (README: stated)
@pytest.mark.parametrize("bad_id", ["1.5", "true", "null", "{}"])
def test_request_ids_that_are_no_ids_are_answered(
    server_factory: Callable[..., HttpServer], bad_id: str
) -> None:
    """A request whose id is neither a string nor an integer gets ``-32600`` with id null
    at the task endpoint (JSON-RPC 2.0), on both eras, instead of HTTP 202 and silence."""
    server = server_factory()
    with RawHttp(server.url) as core, ExtClient(server.url) as ext:
        body = f'{{"jsonrpc":"2.0","id":{bad_id},"method":"tasks/get","params":{{"taskId":"x"}}}}'
        reply = core.post_raw(body)
        assert reply.status == 400 and reply.messages[0]["error"]["code"] == -32600, reply
        assert reply.messages[0]["id"] is None
        head = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tasks/get",
        }
        answer = ext.http.post(server.url, content=body.encode(), headers=head)
        assert answer.status_code == 400 and answer.json()["error"]["code"] == -32600, answer.text
