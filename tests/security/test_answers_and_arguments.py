"""An answered request's id may be used again; a tool's bad arguments are refused in one line
naming the argument, never with the validation library's report (R-ERR-1, hostile input).

Against the example server as a real subprocess on loopback, through both front doors:

- two requests with one id pipelined on one connection (``ping``, ``tools/list``): the second
  starts once the first is answered, and is answered too (before: refused "already in use by
  a request in flight", the id freed only when the first request's code returned);
- ``slow_compute`` with ``seconds`` out of its range (``-1e308``, ``-1``, ``1e9``): an
  ``isError`` result of one line naming the argument and its bound, no traceback in the log
  (before: ``-1e308`` raised ``OverflowError`` inside the tool, its traceback logged);
- arguments that do not validate (a tool's ``tools/call``, and a task's result and
  ``statusMessage`` on both faces): the argument's name and the reason, without pydantic's
  report (the value sent, the error's type, a documentation URL).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable

from testkit.ext_wire import ExtClient
from testkit.sec_harness import ACCEPT, PROTOCOL, HttpServer, RawHttp

#: what pydantic's report of a validation error holds and an answer must not
LIBRARY_TEXT = ("errors.pydantic.dev", "input_value", "[type=", "validation error for")


def _pipelined_twice(server: HttpServer, session_id: str, method: str) -> list[bytes]:
    """Two requests ``method`` with id 7, pipelined in one write on one connection: each
    answer's body."""
    body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": method, "params": {}}).encode()
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
        f"Content-Type: application/json\r\nAccept: {ACCEPT}\r\n"
        f"Mcp-Session-Id: {session_id}\r\nMcp-Protocol-Version: {PROTOCOL}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall((head + body) * 2)
        got = b""
        while got.count(b'"id":7') < 2:
            chunk = sock.recv(65536)
            assert chunk, got
            got += chunk
    return [part for part in got.split(b"HTTP/1.1 ")[1:]]


def test_an_answered_id_may_be_used_again_pipelined(
    server_factory: Callable[..., HttpServer],
) -> None:
    """JSON-RPC 2.0: an id is free once its request is answered. ``ping`` and
    ``tools/list`` sent twice with one id, pipelined: both answered, ten times over."""
    server = server_factory()
    with RawHttp(server.url) as client:
        assert client.session_id is not None
        for method in ("ping", "tools/list"):
            for _ in range(10):
                answers = _pipelined_twice(server, client.session_id, method)
                assert len(answers) == 2, answers
                for answer in answers:
                    assert b'"result"' in answer and b"in use" not in answer, answer[-300:]


#: ``slow_compute``'s out-of-range ``seconds`` and the bound each is refused for
OUT_OF_RANGE = (
    (-1e308, "greater than or equal to 0"),
    (-1, "greater than or equal to 0"),
    (1e9, "less than or equal to 86400"),
)


def test_slow_compute_refuses_seconds_out_of_range_in_one_line(
    server_factory: Callable[..., HttpServer],
) -> None:
    """Hostile input: an ``isError`` result, one line, naming ``seconds`` and its bound;
    nothing raised in the tool (no traceback in the log)."""
    server = server_factory()
    with RawHttp(server.url) as client:
        for seconds, bound in OUT_OF_RANGE:
            call = {"name": "slow_compute", "arguments": {"seconds": seconds}}
            result = client.ok("tools/call", call)
            assert result["isError"] is True
            (text,) = [c["text"] for c in result["content"]]
            want = f"Error executing tool slow_compute: arguments.seconds: Input should be {bound}"
            assert text == want, (seconds, text)
    assert "Traceback" not in server.log() and "OverflowError" not in server.log()


def _clean(text: str) -> None:
    assert "\n" not in text, text
    for library in LIBRARY_TEXT:
        assert library not in text, text


def test_bad_arguments_are_named_without_the_library_report(
    server_factory: Callable[..., HttpServer],
) -> None:
    """R-ERR-1: ``seconds: "abc"`` answers the argument and the reason, in a tool's result,
    in a 2025-11-25 task's result and in a 2026-07-28 task's result and ``statusMessage``."""
    server = server_factory()
    reason = "arguments.seconds: Input should be a valid number, unable to parse string as a number"
    bad = {"name": "slow_compute", "arguments": {"seconds": "abc"}}
    with RawHttp(server.url) as client:
        result = client.ok("tools/call", bad)
        (text,) = [c["text"] for c in result["content"]]
        assert text == f"Error executing tool slow_compute: {reason}"
        _clean(text)
        tid = client.create("slow_compute", {"seconds": "abc"})
        task = client.wait(tid)
        core = client.ok("tasks/result", {"taskId": tid})
        assert reason in task["statusMessage"] and reason in core["content"][0]["text"]
        _clean(task["statusMessage"])
        _clean(core["content"][0]["text"])
    with ExtClient(server.url) as ext:
        tid = ext.result("tools/call", bad)["taskId"]
        done = ext.wait(tid)
        assert reason in done["statusMessage"], done
        _clean(done["statusMessage"])
        _clean(json.dumps(done["result"]))
