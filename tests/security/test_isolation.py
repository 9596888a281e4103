"""Isolation between requestors (R-SEC-1, R-ID-2).

Two requestors, once as two bearer-token subjects (``--tokens``) and once as two
MCP sessions without auth, each run tasks (completed, working, input_required,
enough for several ``tasks/list`` pages). Every cross access (``tasks/get``,
``tasks/result``, ``tasks/cancel`` with the other's IDs, guessed IDs next to them,
``tasks/list``, the other's cursors) is refused exactly like a truly unknown ID (a cursor
exactly like a forged one or garbage): same code, same message, same data, and the same
timing class (medians compared loosely). The victim's tasks are untouched afterwards. The same holds on the tasks
extension's face (2026-07-28) for ``tasks/get|update|cancel``.
"""

from __future__ import annotations

import secrets
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from testkit.ext_wire import ExtClient
from testkit.sec_harness import HttpServer, RawHttp, error_of
from testkit.wire_strategies import _header_value

CONFIG = {"page_size": 2, "rate_limit_calls": 100_000}
TIMING_SAMPLES = 40
ASKING = frozenset({"input_required"})


def _guesses(task_id: str) -> list[str]:
    """IDs an attacker would try next to a leaked one."""
    flip = "A" if task_id[-1] != "A" else "B"
    return [
        task_id[:-1] + flip,
        task_id.upper(),
        task_id + "=",
        task_id[:-2],
        " " + task_id,
        secrets.token_urlsafe(16),
    ]


def _median_ms(client: RawHttp, ids: list[str]) -> float:
    samples = []
    for tid in ids:
        t0 = time.perf_counter()
        client.call("tasks/get", {"taskId": tid})
        samples.append((time.perf_counter() - t0) * 1000)
    return statistics.median(samples)


def run_isolation(victim: RawHttp, attacker: RawHttp) -> None:
    done = victim.create("slow_compute", {"seconds": 0, "label": "secret"})
    failed = victim.create("failing_job", {})
    victim.wait(done)
    victim.wait(failed)
    working = victim.create("slow_compute", {"seconds": 60})
    asking = victim.create("confirm_delete", {"path": "/secret"})
    for _ in range(3):
        victim.create("slow_compute", {"seconds": 0})
    own = attacker.create("slow_compute", {"seconds": 0})
    attacker.wait(own)
    victim_ids = [done, failed, working, asking]

    unknown = secrets.token_urlsafe(16)
    reference = {
        m: error_of(attacker.call(m, {"taskId": unknown}))
        for m in ("tasks/get", "tasks/result", "tasks/cancel")
    }
    for m, err in reference.items():
        assert err["code"] == -32602 and "not found" in err["message"].lower(), (m, err)

    for tid in victim_ids:
        for guess in [tid, *_guesses(tid)]:
            for method, ref in reference.items():
                err = error_of(attacker.call(method, {"taskId": guess}))
                assert err == ref, f"{method} on another's ID differs from an unknown one"

    # tasks/list: only the attacker's own task, on every page
    listed = {t["taskId"] for t in attacker.list_all()}
    victim_all = {t["taskId"] for t in victim.list_all()}
    assert own in listed and not listed & victim_all, (listed, victim_all)

    # cursors: the victim's are refused like a forged one, and reveal nothing
    page = victim.ok("tasks/list", {})
    cursor = page["nextCursor"]
    mine = attacker.create("slow_compute", {"seconds": 0})
    attacker.create("slow_compute", {"seconds": 0})
    own_cursor = attacker.ok("tasks/list", {})["nextCursor"]
    forged = own_cursor[:-2] + ("AA" if own_cursor[-2:] != "AA" else "BB")
    stolen_err = error_of(attacker.call("tasks/list", {"cursor": cursor}))
    forged_err = error_of(attacker.call("tasks/list", {"cursor": forged}))
    assert stolen_err == forged_err, (stolen_err, forged_err)
    assert stolen_err["code"] == -32602
    # ... and exactly like garbage: one answer, whatever was wrong with the cursor
    body = own_cursor.split(".")[0]
    for junk in ["garbage", "a.b.c", "%%.%%", body + ".", body + ".AAAA", "x" * 2000]:
        junk_err = error_of(attacker.call("tasks/list", {"cursor": junk}))
        assert junk_err == stolen_err, (junk, junk_err, stolen_err)
    for tid in victim_ids:
        assert tid not in str(stolen_err)
    assert mine  # the attacker's own cursor still works
    assert "tasks" in attacker.ok("tasks/list", {"cursor": own_cursor})

    # timing class: another's IDs vs unknown IDs, interleaved, medians within a loose bound
    others = [victim_ids[i % len(victim_ids)] for i in range(TIMING_SAMPLES)]
    unknowns = [secrets.token_urlsafe(16) for _ in range(TIMING_SAMPLES)]
    m_other = statistics.median(
        [_median_ms(attacker, others[i : i + 10]) for i in range(0, TIMING_SAMPLES, 10)]
    )
    m_unknown = statistics.median(
        [_median_ms(attacker, unknowns[i : i + 10]) for i in range(0, TIMING_SAMPLES, 10)]
    )
    assert m_other < 3 * m_unknown + 20 and m_unknown < 3 * m_other + 20, (m_other, m_unknown)

    # nothing of the victim's changed: working still working, result intact
    assert victim.ok("tasks/get", {"taskId": working})["status"] == "working"
    assert victim.ok("tasks/get", {"taskId": asking})["status"] == "input_required"
    result = victim.ok("tasks/result", {"taskId": done})
    assert result["content"][0]["text"] == "done after 0s (secret)"
    assert {done, failed, working, asking} <= {t["taskId"] for t in victim.list_all()}
    victim.ok("tasks/cancel", {"taskId": working})
    victim.ok("tasks/cancel", {"taskId": asking})


def test_isolation_between_token_subjects(
    server_factory: Callable[..., HttpServer], tokens_file: Path
) -> None:
    server = server_factory("--tokens", str(tokens_file), engine_config=CONFIG)
    with (
        RawHttp(server.url, token="tok-alice") as alice,
        RawHttp(server.url, token="tok-bob") as bob,
    ):
        run_isolation(alice, bob)
        run_isolation(bob, alice)
    # the same subject on a new connection is the same requestor; a bad token is refused
    with RawHttp(server.url, token="tok-alice") as again:
        assert again.list_all()
    bad = RawHttp(server.url, token="tok-mallory")
    with pytest.raises(httpx.HTTPStatusError) as refused:
        bad.initialize()
    assert refused.value.response.status_code == 401
    bad.close()


def test_isolation_between_sessions_without_auth(
    server_factory: Callable[..., HttpServer],
) -> None:
    server = server_factory(engine_config=CONFIG)
    with RawHttp(server.url) as a, RawHttp(server.url) as b:
        run_isolation(a, b)
        run_isolation(b, a)
    with RawHttp(server.url) as fresh:  # a new session sees nothing at all
        assert fresh.list_all() == []


def test_stateless_without_identity_never_lists(
    server_factory: Callable[..., HttpServer],
) -> None:
    # R-SEC-2: no binding possible -> no tasks.list capability (and IDs are unguessable)
    server = server_factory("--stateless")
    client = RawHttp(server.url)
    r = client.http.post(
        server.url,
        headers=client.headers,
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "x", "version": "1"},
            },
        },
    )
    from testkit.sec_harness import parse_body

    caps = parse_body(r.headers["content-type"], r.text)[0]["result"]["capabilities"]
    assert "list" not in caps["tasks"], caps
    client.close()


def test_extension_isolation_between_token_subjects(
    server_factory: Callable[..., HttpServer], tokens_file: Path
) -> None:
    """X-SEC-2, R-SEC-1: bob's tasks/get|update|cancel of alice's task ids (and guesses next
    to them) get exactly the answer of an unknown id; alice's tasks are untouched."""
    server = server_factory("--tokens", str(tokens_file), engine_config=CONFIG)
    alice = ExtClient(server.url, headers={"Authorization": "Bearer tok-alice"})
    bob = ExtClient(server.url, headers={"Authorization": "Bearer tok-bob"})
    with alice, bob:
        done = alice.result("tools/call", {"name": "slow_compute", "arguments": {"seconds": 0}})
        working = alice.result("tools/call", {"name": "slow_compute", "arguments": {"seconds": 60}})
        asking = alice.result(
            "tools/call", {"name": "confirm_delete", "arguments": {"filename": "secret"}}
        )
        alice.wait(done["taskId"])
        key = next(iter(alice.wait(asking["taskId"], until=ASKING)["inputRequests"]))
        ids = [done["taskId"], working["taskId"], asking["taskId"]]

        def params(method: str, task_id: str) -> dict[str, Any]:
            if method == "tasks/update":
                return {"taskId": task_id, "inputResponses": {key: {"action": "decline"}}}
            return {"taskId": task_id}

        methods = ("tasks/get", "tasks/update", "tasks/cancel")
        unknown = secrets.token_urlsafe(16)
        reference = {m: error_of(bob.send(m, params(m, unknown))) for m in methods}
        for m, err in reference.items():
            assert err["code"] == -32602 and "not found" in err["message"].lower(), (m, err)
        for tid in ids:
            for guess in [tid, *_guesses(tid)]:
                for m in methods:
                    route = {"Mcp-Name": _header_value(guess)}  # X-HTTP-1 (base64 if need be)
                    err = error_of(bob.send(m, params(m, guess), headers=route))
                    assert err == reference[m], (m, guess)

        # nothing of alice's changed
        assert alice.result("tasks/get", {"taskId": ids[1]})["status"] == "working"
        still = alice.result("tasks/get", {"taskId": ids[2]})
        assert still["status"] == "input_required" and key in still["inputRequests"]
        assert alice.result("tasks/get", {"taskId": ids[0]})["status"] == "completed"
        for tid in ids[1:]:
            alice.result("tasks/cancel", {"taskId": tid})
