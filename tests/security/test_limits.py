"""Limits under a burst (R-SEC-3, R-SEC-4, R-TTL-2).

One requestor bursts (concurrent task creation, then ``tasks/*`` calls) while
another is served normally; the per-requestor concurrency limit and the rate
limit hold for the first and never touch the second; the maximum ttl is clamped
and the actual ttl reported. Low limits are set with the example server's
limit flags (added for finding F-3).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from mcp_tasks.runtime.serve.result_stream import STREAM_AFTER_S
from testkit.sec_harness import HttpServer, RawHttp
from testkit.wait import until

MAX_ACTIVE = 3
RATE_CALLS = 30
RATE_WINDOW_S = 3.0
MAX_TTL = 60_000
CONFIG = {
    "max_active_per_requestor": MAX_ACTIVE,
    "rate_limit_calls": RATE_CALLS,
    "rate_limit_window_s": RATE_WINDOW_S,
    "max_ttl_ms": MAX_TTL,
    "default_ttl_ms": 30_000,
}


def _create(url: str, token: str, seconds: float) -> dict[str, Any]:
    with RawHttp(url, token=token) as c:
        return c.call(
            "tools/call",
            {"name": "slow_compute", "arguments": {"seconds": seconds}, "task": {}},
        )


def test_concurrency_and_rate_limits_hold_per_requestor(
    server_factory: Callable[..., HttpServer], tokens_file: Path
) -> None:
    server = server_factory("--tokens", str(tokens_file), engine_config=CONFIG)
    url = server.url

    # -- concurrency: alice bursts 12 concurrent creations; bob runs tasks meanwhile
    with ThreadPoolExecutor(max_workers=12) as pool:
        burst = [pool.submit(_create, url, "tok-alice", 30) for _ in range(12)]
        with RawHttp(url, token="tok-bob") as bob:
            bob_ids = [
                bob.create("slow_compute", {"seconds": 0, "label": f"b{i}"}) for i in range(3)
            ]
            for tid in bob_ids:
                assert bob.wait(tid)["status"] == "completed"
        answers = [f.result(timeout=120) for f in burst]
    accepted = [a for a in answers if "result" in a]
    refused = [a for a in answers if "error" in a]
    assert len(accepted) == MAX_ACTIVE, answers
    for a in refused:
        assert a["error"]["code"] == -32000 and "active" in a["error"]["message"].lower(), a
    with RawHttp(url, token="tok-alice") as alice:
        active = [t for t in alice.list_all() if t["status"] == "working"]
        assert len(active) == MAX_ACTIVE
        # cancelling one frees one slot, exactly
        alice.ok("tasks/cancel", {"taskId": active[0]["taskId"]})
        assert "result" in alice.call(
            "tools/call", {"name": "slow_compute", "arguments": {"seconds": 30}, "task": {}}
        )
        assert "error" in alice.call(
            "tools/call", {"name": "slow_compute", "arguments": {"seconds": 30}, "task": {}}
        )
        for t in alice.list_all():
            if t["status"] == "working":
                alice.ok("tasks/cancel", {"taskId": t["taskId"]})

    time.sleep(RATE_WINDOW_S + 0.2)  # a fresh rate window for everyone (time is the limit's unit)

    # -- rate limit: alice floods tasks/get; bob keeps being served
    with RawHttp(url, token="tok-alice") as alice, RawHttp(url, token="tok-bob") as bob:
        results = []
        bob_ok = 0
        start = time.monotonic()
        for i in range(3 * RATE_CALLS):
            results.append(alice.call("tasks/get", {"taskId": f"probe-{i}"}))
            if i % 5 == 0:
                bob_ok += "result" in bob.call("tasks/list", {})
        elapsed = time.monotonic() - start
        limited = [r for r in results if r["error"]["code"] == -32000]
        if elapsed < RATE_WINDOW_S:  # all of it inside one window: exact count
            assert len(results) - len(limited) == RATE_CALLS, [r["error"] for r in results[:3]]
        assert len(limited) >= RATE_CALLS, "the rate limit did not hold"
        assert all("rate" in r["error"]["message"].lower() for r in limited)
        assert bob_ok == len(range(0, 3 * RATE_CALLS, 5)), "the other requestor was limited too"
        time.sleep(RATE_WINDOW_S + 0.2)  # the window passes (the behaviour under test)
        assert alice.call("tasks/get", {"taskId": "again"})["error"]["code"] == -32602


def test_max_ttl_is_clamped_and_reported(
    server_factory: Callable[..., HttpServer], tokens_file: Path
) -> None:
    server = server_factory("--tokens", str(tokens_file), engine_config=CONFIG)
    with RawHttp(server.url, token="tok-carol") as c:
        for asked, actual in [
            (10**15, MAX_TTL),
            (2**63, MAX_TTL),
            (MAX_TTL + 1, MAX_TTL),
            (None, MAX_TTL),  # unlimited is refused: clamped to the maximum
            (1_000, 1_000),
        ]:
            res = c.ok(
                "tools/call",
                {"name": "slow_compute", "arguments": {"seconds": 0}, "task": {"ttl": asked}},
            )
            assert res["task"]["ttl"] == actual, (asked, res)
            got = c.wait(res["task"]["taskId"])
            assert got["ttl"] == actual, (asked, got)
        res = c.ok("tools/call", {"name": "slow_compute", "arguments": {"seconds": 0}, "task": {}})
        assert res["task"]["ttl"] == 30_000  # the default
        err = c.call(
            "tools/call",
            {"name": "slow_compute", "arguments": {"seconds": 0}, "task": {"ttl": -1}},
        )
        assert err["error"]["code"] == -32602 and "ttl" in err["error"]["message"]


def test_limit_flags_are_checked(capsys: pytest.CaptureFixture[str]) -> None:
    """F-3: the limits are flags of the example server; bad values exit 2 with a usage line."""
    from mcp_tasks.examples import server as example

    for bad in (
        ["--rate-limit", "lots"],
        ["--rate-limit", "0/10"],
        ["--max-active", "0"],
        ["--page-size", "0"],
        ["--max-ttl", "-5"],
    ):
        with pytest.raises(SystemExit) as exited:
            example._parse_args(["--stdio", *bad])
        assert exited.value.code == 2, bad
        err = capsys.readouterr().err
        assert "error:" in err and "Traceback" not in err, err
    args = example._parse_args(["--stdio", "--rate-limit", "5/2", "--max-ttl", "1000"])
    cfg = args.engine_config
    assert (cfg.rate_limit_calls, cfg.rate_limit_window_s, cfg.max_ttl_ms) == (5, 2.0, 1000)
    assert example._parse_args(["--stdio"]).engine_config is None  # the defaults


def test_held_results_count_against_the_rate_limit_once_as_they_arrive(
    server_factory: Callable[..., HttpServer], tokens_file: Path
) -> None:
    """R-SEC-3: a ``tasks/result`` held on a working task is counted as it arrives. Past the
    limit it is answered ``-32000`` at once, while the others are still held (well before
    the task endpoint turns a held one's answer into a stream, after ``STREAM_AFTER_S``); a
    held one is never counted again, however long it waits and whichever way its answer
    goes (bob's budget is what he spent, exactly)."""
    calls, held, excess = 10, 9, 3  # alice: 1 creation + 9 held fill it, 3 more are refused
    server = server_factory(
        "--tokens",
        str(tokens_file),
        engine_config={"rate_limit_calls": calls, "rate_limit_window_s": 600},
    )
    work = {"seconds": STREAM_AFTER_S + 1}  # ends after the held ones' answers became streams
    with (
        RawHttp(server.url, token="tok-alice") as alice,
        RawHttp(server.url, token="tok-bob") as bob,
        ThreadPoolExecutor(max_workers=held + excess + 4) as pool,
    ):
        mine, his = alice.create("slow_compute", work), bob.create("slow_compute", work)
        fetch = {"taskId": mine}
        theirs = [pool.submit(alice.call, "tasks/result", fetch) for _ in range(held + excess)]
        bobs = [pool.submit(bob.call, "tasks/result", {"taskId": his}) for _ in range(4)]
        refused = until(
            lambda: [f.result() for f in theirs if f.done()],
            STREAM_AFTER_S / 2,  # "at once": long before the streams
            satisfied=lambda done: len(done) >= excess,
            what="the calls past the limit answered while the others are held",
        )
        assert len(refused) == excess, refused
        for answer in refused:
            assert answer["error"]["code"] == -32000, answer
            assert answer["error"]["message"].startswith("Rate limit exceeded"), answer
        results = [f.result(timeout=120) for f in theirs + bobs]
        assert sum("result" in r for r in results) == held + 4, results
        # bob spent 1 creation + 4 results: 5 calls are left to him, however they were served
        left = [bob.call("tasks/get", {"taskId": his}) for _ in range(calls - 5 + 1)]
        assert ["result" in r for r in left] == [True] * (calls - 5) + [False], left
