"""Wire fuzzing of the example server (issue 8, part 1), over Streamable HTTP and stdio.

Valid messages come from our own generated models (``wire_strategies``); mutated ones
carry wrong types, missing fields, huge/negative/odd ``ttl``, 1 MB strings, unicode,
deep nesting, unknown methods, unknown ``_meta``, bad JSON and bad envelopes.
Every request gets a JSON-RPC answer, notifications get silence, nothing answers
HTTP 5xx, no traceback reaches the client, nothing hangs (each message has a
deadline), the server stays up, and afterwards it still runs a task end to end.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from sec_harness import HttpServer, RawHttp, RawStdio, Reply, assert_no_leak
from wire_strategies import Case, cases

HTTP_EXAMPLES = 300
STDIO_EXAMPLES = 200
MESSAGE_DEADLINE = 30.0  # seconds: "no hang"
FUZZ_SETTINGS = settings(
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.explicit, Phase.generate],  # no shrinking against a live server: bounded time
)
_ids = itertools.count(1)


def _is_error(msg: dict[str, Any]) -> bool:
    err = msg.get("error")
    return (
        isinstance(err, dict)
        and isinstance(err.get("code"), int)
        and isinstance(err.get("message"), str)
    )


def _is_answer(msg: dict[str, Any]) -> bool:
    return msg.get("jsonrpc") == "2.0" and (_is_error(msg) or isinstance(msg.get("result"), dict))


def finished_ids(client: Any, n: int = 3) -> list[str]:
    ids = []
    for i in range(n):
        res = client.ok(
            "tools/call",
            {"name": "slow_compute", "arguments": {"seconds": 0, "label": f"k{i}"}, "task": {}},
        )
        ids.append(res["task"]["taskId"])
    return ids


def end_to_end(client: Any) -> None:
    """A normal task still works: create, poll to completed, fetch the exact result."""
    res = client.ok(
        "tools/call",
        {"name": "slow_compute", "arguments": {"seconds": 0.1, "label": "after"}, "task": {}},
    )
    tid = res["task"]["taskId"]
    for _ in range(600):
        task = client.ok("tasks/get", {"taskId": tid})
        if task["status"] == "completed":
            break
        assert task["status"] == "working", task
        import time

        time.sleep(0.05)
    result = client.ok("tasks/result", {"taskId": tid})
    assert result["content"][0]["text"] == "done after 0.1s (after)"
    assert result["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": tid}


# --------------------------------------------------------------------------- HTTP


@pytest.fixture(scope="module")
def http_target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HttpServer, RawHttp]]:
    server = HttpServer(log_dir=tmp_path_factory.mktemp("fuzz-http")).start()
    client = RawHttp(server.url, timeout=MESSAGE_DEADLINE).initialize()
    try:
        yield server, client
    finally:
        client.close()
        server.stop()


def check_http(case: Case, reply: Reply) -> None:
    assert reply.status < 500, f"HTTP {reply.status} for {case.kind}: {reply.body[:300]}"
    assert_no_leak(reply.body)
    if reply.status == 413:  # the SDK's request-size guard (4 MB): a transport refusal
        assert len(case.body) > 1 << 20, case
        return
    if case.notification:
        assert reply.status == 202 and not reply.body.strip(), (case.kind, reply)
        return
    if case.request_id is not None:
        resp = reply.response(case.request_id)
        if resp is None:  # refused before the id was read: a JSON-RPC error, id null
            assert reply.status == 400, (case.kind, reply.status, reply.body[:300])
            assert len(reply.messages) == 1 and _is_error(reply.messages[0]), reply.body[:300]
            assert reply.messages[0].get("id") is None
        else:
            assert _is_answer(resp), resp
        return
    # malformed input: an error answer (id null) or, for a non-request, silence
    for msg in reply.messages:
        assert _is_error(msg) and msg.get("id") in (None, case.sent_id), msg
    if not reply.messages:
        assert reply.status in (202, 400, 406, 415), (case.kind, reply.status, reply.body[:300])


def test_fuzz_streamable_http(
    http_target: tuple[HttpServer, RawHttp], fuzz_counter: Callable[[str, int], None]
) -> None:
    server, client = http_target
    known = finished_ids(client)
    kinds: dict[str, int] = {}

    @settings(FUZZ_SETTINGS, max_examples=HTTP_EXAMPLES)
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        case = data.draw(cases(known, next(_ids)))
        kinds[case.kind] = kinds.get(case.kind, 0) + 1
        try:
            reply = client.post_raw(case.body, timeout=MESSAGE_DEADLINE)
        except httpx.TimeoutException:
            pytest.fail(f"no answer within {MESSAGE_DEADLINE}s (hang) for {case!r}")
        check_http(case, reply)
        fuzz_counter("http", 1)

    run()
    assert server.alive(), server.log()[-3000:]
    end_to_end(client)
    with RawHttp(server.url) as fresh:  # a new session is served too
        end_to_end(fresh)
    log = server.log()
    assert "Exception in ASGI application" not in log, log[-3000:]
    assert set(kinds) >= {"valid", "bad_json", "megabyte_string", "deep_nesting"}, kinds


# --------------------------------------------------------------------------- stdio


@pytest.fixture(scope="module")
def stdio_target() -> Iterator[RawStdio]:
    with RawStdio() as client:
        yield client


def envelope_ok(body: bytes) -> bool:
    """Whether the SDK's stdio transport can read this line at all (what it does first)."""
    import mcp_types

    try:
        mcp_types.jsonrpc_message_adapter.validate_json(body, by_name=False)
    except Exception:
        return False
    return True


def _ping_barrier(client: RawStdio, case: Case) -> None:
    """Everything the server said up to the answer of a ping sent after ``case``."""
    pid = f"ping-{next(_ids)}"
    client.send(json.dumps({"jsonrpc": "2.0", "id": pid, "method": "ping"}))
    for msg in client.messages(timeout=MESSAGE_DEADLINE):
        assert_no_leak(json.dumps(msg))
        if msg.get("id") == pid and "method" not in msg:
            assert msg.get("result") == {}, msg
            return
        if "method" in msg:
            continue  # a status notification or a server request of some task
        # an answer nobody asked for: only a parse/invalid-request error (id null) is right
        assert not case.notification, f"a notification was answered: {msg}"
        assert _is_error(msg) and msg.get("id") is None, msg
    pytest.fail(f"stdio server stopped answering after {case!r}")


def test_fuzz_stdio(stdio_target: RawStdio, fuzz_counter: Callable[[str, int], None]) -> None:
    client = stdio_target
    known = finished_ids(client)

    @settings(FUZZ_SETTINGS, max_examples=STDIO_EXAMPLES)
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        case = data.draw(cases(known, next(_ids)))
        client.send(case.body)
        # Invalid envelopes are dropped silently over stdio (F-2, xfail below): not asserted here.
        if case.request_id is not None and case.well_formed and envelope_ok(case.body):
            resp = client.recv_response(case.request_id, timeout=MESSAGE_DEADLINE)
            if resp is None:
                # refused before the id was read: the ping barrier sees the id-null error
                _ping_barrier(client, case)
                pytest.fail(f"no answer over stdio for {case!r}")
            assert _is_answer(resp), resp
            assert_no_leak(json.dumps(resp))
        _ping_barrier(client, case)
        assert client.alive(), bytes(client.stderr[-3000:]).decode(errors="replace")
        fuzz_counter("stdio", 1)

    run()
    assert client.alive()
    end_to_end(client)


# --------------------------------------------------------------------------- findings


@pytest.mark.xfail(
    strict=True,
    reason="F-2 (security-findings.md): over stdio the SDK drops unparsable lines and invalid "
    "envelopes silently; JSON-RPC 2.0 wants -32700/-32600 with id null, and a request whose "
    "params are not an object is never answered (the client hangs). Fix in the adapter "
    "(examples/server.py stdio wrapper) once /work/notes/adapter-done exists.",
)
def test_stdio_answers_malformed_messages_F2(stdio_target: RawStdio) -> None:
    client = stdio_target
    for body, code in [
        (b"{bad json", -32700),
        (b'{"jsonrpc":"2.0","id":77,"method":"tasks/get","params":[1]}', -32600),
        (b'"just a string"', -32600),
    ]:
        client.send(body)
        got = [m for m in client.messages(timeout=3) if "method" not in m]
        assert got and _is_error(got[0]) and got[0]["error"]["code"] in (code, -32602), (body, got)


@pytest.mark.xfail(
    strict=True,
    reason="F-4 (security-findings.md): over HTTP an invalid JSON-RPC envelope answers 400 "
    "-32602 with pydantic's full multi-line validation report (library version, URLs); it "
    "should be -32600 'Invalid Request' with a short message. Adapter-owned.",
)
def test_invalid_envelope_answer_is_short_F4(http_target: tuple[HttpServer, RawHttp]) -> None:
    _, client = http_target
    reply = client.post_raw(b'{"jsonrpc":"1.0","id":5,"method":"ping"}')
    assert reply.status == 400
    err = reply.messages[0]["error"]
    assert err["code"] == -32600
    assert "pydantic" not in reply.body and "\n" not in err["message"], err


@pytest.mark.xfail(
    strict=True,
    reason="F-1 (security-findings.md): slow_compute with a non-finite or huge `seconds` "
    "raises OverflowError inside the example tool (traceback in the server log, task failed "
    "with 'Error executing tool'); it should answer -32602 naming arguments.seconds. "
    "Adapter-owned (templates/examples/server.py).",
)
def test_slow_compute_rejects_huge_seconds_F1(
    http_target: tuple[HttpServer, RawHttp], tmp_path: Path
) -> None:
    server, client = http_target
    before = server.log().count("Traceback")
    resp = client.call(
        "tools/call",
        {"name": "slow_compute", "arguments": {"seconds": 1e308}, "task": {}},
    )
    if "result" in resp:
        tid = resp["result"]["task"]["taskId"]
        import time

        time.sleep(1)
        task = client.ok("tasks/get", {"taskId": tid})
        client.call("tasks/cancel", {"taskId": tid})
        assert task["status"] == "working", task  # it waits (forever) as asked, no crash
    else:
        assert resp["error"]["code"] == -32602 and "seconds" in resp["error"]["message"]
    assert server.log().count("Traceback") == before, server.log()[-2000:]
