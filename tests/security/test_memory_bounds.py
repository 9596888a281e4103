"""What all requestors keep together is bounded, and sessions do not multiply it (R-SEC-4).

Without tokens every 2025-11-25 session was its own requestor with its own caps (1,000
tasks, 64 MiB of results), so one client address opening sessions (up to 1,000 of them)
could make the server keep about 64 GiB; a stateless server with rotated client
addresses likewise, with nothing bounding all requestors together. Now:

- every requestor without a token at one client address (its sessions, its anonymous
  requests on either face) shares one budget of tasks and bytes (``--max-tasks``,
  ``--max-result-bytes-per-requestor``);
- all requestors together keep at most ``--max-tasks-total`` tasks and
  ``--max-result-bytes-total`` bytes;
- at any bound the oldest finished tasks go first (another requestor's, at a shared or the
  server-wide bound), and a creation is refused (-32000 "Too many tasks kept") when none
  can go;
- the bytes are what a task holds: the arguments of a running one, the result, error and
  statusMessage of a finished one.

The end-to-end tests run the example server as a process of its own (they exhaust its
server-wide bounds) with small budgets set by flags, so the attack stays cheap; the memory
figures are the server's RSS (Linux ``/proc``), with margins far below what the same
attack pinned before (see each test). Other client hosts are other loopback addresses
(127.0.0.2, ...): the whole 127/8 is the loopback on Linux.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from mcp_tasks.errors import RetentionLimitExceeded, TaskExpired
from mcp_tasks.protocol import FAILED, REVISION, TOOLS_CALL
from mcp_tasks.runtime import EngineConfig, TaskContext, TaskEngine
from mcp_tasks.runtime.engine.limits import Retention, outcome_size
from testkit.ext_wire import ExtClient
from testkit.sec_harness import HttpServer, RawHttp, error_of, rss_kb

MiB = 1 << 20
#: a slow_compute label: its result keeps it twice (the text and the structured content),
#: about 512 KiB of JSON, and the call's arguments hold it while the task runs
LABEL = 256 * 1024
#: small byte budgets (the defaults are 4 MiB, 64 MiB and 1 GiB): 4 MiB per client address
#: holds about 8 results, 8 MiB in all about 16
BYTES = (
    "--max-result-bytes", str(MiB),
    "--max-result-bytes-per-requestor", str(4 * MiB),
    "--max-result-bytes-total", str(8 * MiB),
)  # fmt: skip
EXPIRED = "Failed to retrieve task: Task has expired"
KEPT_REFUSED = "Too many tasks kept: at most"


def _call(client: RawHttp, label: str, seconds: float = 0) -> dict[str, Any]:
    args = {"seconds": seconds, "label": label}
    return client.call("tools/call", {"name": "slow_compute", "arguments": args, "task": {}})


def _big_tasks(client: RawHttp, count: int, tag: str) -> list[str]:
    """``count`` slow_compute tasks with a big label each, waited for; their ids."""
    made = []
    for i in range(count):
        tid = client.create("slow_compute", {"seconds": 0, "label": f"{tag}{i}:".ljust(LABEL, "x")})
        client.wait(tid)
        made.append(tid)
    return made


def _expired(client: RawHttp, task_id: str) -> bool:
    answer = client.call("tasks/get", {"taskId": task_id})
    return "error" in answer and answer["error"]["message"] == EXPIRED


# --------------------------------------------------------------------------- end to end


def test_sessions_of_one_address_share_one_budget_R_SEC_4(
    server_factory: Callable[..., HttpServer],
) -> None:
    """Sessions of one client address (and its anonymous requests on the 2026-07-28 face)
    share one budget: two sessions holding 8 running tasks between them leave a third
    session, and the extension face, no room (-32000); a finished task of one session is
    dropped for another's. 48 sessions of one address creating 10 tasks of ~512 KiB each
    keep about 4 MiB between them, and the server's RSS grows by less than 32 MiB (with a
    budget per session, the same attack grew it by 89 MiB: 48 x 4 MiB of JSON)."""
    server = server_factory("--max-active", "4", "--max-tasks", "8", *BYTES)
    url = server.url
    with RawHttp(url) as s1, RawHttp(url) as s2, RawHttp(url) as s3, ExtClient(url) as ext:
        running = [s.create("slow_compute", {"seconds": 600}) for s in (s1, s2) for _ in range(4)]
        refused = error_of(_call(s3, "third"))
        assert refused["code"] == -32000, refused
        assert refused["message"].startswith(f"{KEPT_REFUSED} 8 per requestor"), refused
        ext_refused = error_of(ext.send("tools/call", {"name": "failing_job", "arguments": {}}))
        assert ext_refused == refused
        s1.ok("tasks/cancel", {"taskId": running[0]})  # finished: it may go now
        made = s3.create("slow_compute", {"seconds": 0, "label": "third"})
        assert _expired(s1, running[0])  # s1's, dropped for s3's
        assert s3.wait(made)["status"] == "completed"
        for owner, tid in zip((s1,) * 4 + (s2,) * 4, running, strict=True):
            if tid != running[0]:
                owner.ok("tasks/cancel", {"taskId": tid})

        pid = server.pid
        with RawHttp(url) as warm:  # the buffers of such requests allocated once
            _big_tasks(warm, 4, "warm")
        base = peak = rss_kb(pid)
        sessions: list[RawHttp] = []
        made_by: list[list[str]] = []
        try:
            for i in range(48):
                session = RawHttp(url).initialize()
                sessions.append(session)
                made_by.append(_big_tasks(session, 10, f"s{i}"))
                peak = max(peak, rss_kb(pid))
            grown_mib = (peak - base) / 1024
            print(f"RSS {base / 1024:.0f} MiB, grown by {grown_mib:.1f} MiB at most")
            assert grown_mib < 32, f"RSS grew by {grown_mib:.1f} MiB (budget 4 MiB per address)"
            kept = sum(len(s.list_all()) for s in sessions)
            assert 0 < kept <= 9, kept  # 4 MiB / ~512 KiB, and the one that just ended
            assert all(_expired(sessions[0], tid) for tid in made_by[0])
            last = sessions[-1].ok("tasks/result", {"taskId": made_by[-1][-1]})
            assert last["content"][0]["text"].startswith("done after 0s (s479:")
        finally:
            for session in sessions:
                session.close()


def test_server_wide_bounds_hold_across_addresses_R_SEC_4(
    server_factory: Callable[..., HttpServer],
) -> None:
    """A stateless server, clients at 24 addresses (rotated addresses: each its own
    anonymous requestor): all of them keep at most ``--max-result-bytes-total`` (8 MiB)
    together, the oldest finished of any address dropped first, and the server's RSS grows
    by less than 24 MiB (with no bound in all it grew by 43 MiB: 24 x 4 MiB of JSON).
    At ``--max-tasks-total`` with every task running, one more creation from yet another
    address is refused (-32000) until one ends."""
    server = server_factory(
        "--stateless", "--max-active", "8", "--max-tasks", "8", "--max-tasks-total", "40", *BYTES
    )
    url = server.url
    pid = server.pid
    hosts = [f"127.0.0.{n}" for n in range(2, 40)]
    clients = {h: RawHttp(url, stateless=True, local_address=h) for h in hosts}
    try:
        _big_tasks(clients[hosts[-1]], 4, "warm")
        base = peak = rss_kb(pid)
        made: dict[str, list[str]] = {}
        for i, host in enumerate(hosts[:24]):
            made[host] = _big_tasks(clients[host], 8, f"a{i}")
            peak = max(peak, rss_kb(pid))
        grown_mib = (peak - base) / 1024
        print(f"RSS {base / 1024:.0f} MiB, grown by {grown_mib:.1f} MiB at most")
        assert grown_mib < 24, f"RSS grew by {grown_mib:.1f} MiB (8 MiB in all)"
        first, newest = clients[hosts[0]], clients[hosts[23]]
        # the last 7 fitted its own budget (4 MiB): the bound in all dropped them
        assert all(_expired(first, tid) for tid in made[hosts[0]])
        kept = [
            tid for host in hosts[:24] for tid in made[host] if not _expired(clients[host], tid)
        ]
        assert 0 < len(kept) <= 17, len(kept)  # 8 MiB / ~512 KiB, and the one that just ended
        assert made[hosts[23]][-1] in kept
        text = newest.ok("tasks/result", {"taskId": made[hosts[23]][-1]})["content"][0]["text"]
        assert text.startswith("done after 0s (a237:")

        # 5 more addresses hold 40 running tasks: every finished one went to make room
        running: dict[str, list[str]] = {}
        for host in hosts[24:29]:
            running[host] = [
                clients[host].create("slow_compute", {"seconds": 600}) for _ in range(8)
            ]
        assert all(_expired(clients[host], tid) for host in hosts[:24] for tid in made[host])
        late = clients[hosts[29]]
        refused = error_of(_call(late, "late"))
        assert refused["code"] == -32000, refused
        assert refused["message"] == (
            f"{KEPT_REFUSED} 40 in all and 8 per requestor, none of them finished"
        ), refused
        one = running[hosts[24]][0]
        clients[hosts[24]].ok("tasks/cancel", {"taskId": one})
        late_task = late.create("slow_compute", {"seconds": 0, "label": "late"})
        assert _expired(clients[hosts[24]], one)  # another address's, at the bound in all
        assert late.wait(late_task)["status"] == "completed"
        for host, ids in running.items():
            for tid in ids[1:] if host == hosts[24] else ids:
                clients[host].ok("tasks/cancel", {"taskId": tid})
    finally:
        for client in clients.values():
            client.close()


# --------------------------------------------------------------------------- Retention


def _done(ret: Retention, task_id: str, size: int = 0) -> list[tuple[str, str]]:
    return ret.finished(task_id, size)


def test_a_shared_budget_drops_its_oldest_finished_of_any_of_its_requestors() -> None:
    ret = Retention(max_tasks=3, max_bytes=1000, total_tasks=100, total_bytes=10_000)
    addr = "address:10.0.0.1"
    assert ret.admit("session:1", "t1", budget=addr) == []
    assert ret.admit("session:2", "t2", budget=addr) == []
    assert ret.admit("session:2", "t3", budget=addr) == []
    _done(ret, "t2")
    _done(ret, "t1")  # finished after t2: t2 is the oldest finished
    assert ret.admit("session:1", "t4", budget=addr) == [("session:2", "t2")]
    assert ret.admit("session:3", "t5", budget=addr) == [("session:1", "t1")]
    with pytest.raises(RetentionLimitExceeded, match="at most 3 per requestor, none of them"):
        ret.admit("session:4", "t6", budget=addr)  # t3, t4, t5 all running
    assert ret.kept(addr) == (3, 0)
    assert ret.admit("subject:alice", "t7") == []  # a token's subject: its own budget
    assert ret.kept("subject:alice") == (1, 0)


def test_the_total_drops_the_oldest_finished_of_any_budget() -> None:
    ret = Retention(max_tasks=3, max_bytes=1000, total_tasks=4, total_bytes=10_000)
    for i, owner in enumerate(("a", "a", "b", "c")):
        ret.admit(owner, f"t{i}")
    _done(ret, "t2")
    _done(ret, "t0")
    assert ret.admit("d", "t4") == [("b", "t2")]  # b's: the first finished of all
    assert ret.admit("d", "t5") == [("a", "t0")]
    with pytest.raises(RetentionLimitExceeded, match="at most 4 in all and 3 per requestor"):
        ret.admit("e", "t6")
    assert len(ret) == 4 and ret.kept("b") == (0, 0)


def test_bytes_count_arguments_then_the_outcome() -> None:
    """A running task counts its arguments' bytes; its outcome's replace them as it ends,
    and the oldest finished go past the budget's byte cap, then past the total's."""
    ret = Retention(max_tasks=10, max_bytes=100, total_tasks=100, total_bytes=150)
    assert ret.admit("a", "t1", 40) == []
    with pytest.raises(RetentionLimitExceeded, match="at most 100 bytes per requestor"):
        ret.admit("a", "t2", 61)  # t1's arguments are held while it runs
    assert ret.kept("a") == (1, 40) and ret.bytes == 40
    assert _done(ret, "t1", 30) == []
    assert ret.admit("a", "t2", 10) == []
    assert _done(ret, "t2", 60) == []
    assert ret.admit("a", "t3", 20) == [("a", "t1")]  # 30 + 60 + 20 > 100: t1 goes
    assert _done(ret, "t3", 90) == [("a", "t2")]
    assert ret.kept("a") == (1, 90)
    assert ret.admit("b", "u1", 50) == []
    assert _done(ret, "u1", 70) == [("a", "t3")]  # 90 + 70 > 150 in all: a's goes
    assert (ret.bytes, len(ret)) == (70, 1)
    assert _done(ret, "u1", 5) == []  # noted once


def test_a_task_that_just_ended_is_never_its_own_drop() -> None:
    ret = Retention(max_tasks=10, max_bytes=100, total_tasks=10, total_bytes=100)
    ret.admit("a", "t1")
    ret.admit("a", "t2")
    assert _done(ret, "t1", 0) == []
    assert _done(ret, "t2", 500) == []  # t1 frees no byte: kept, and t2 over the cap stays
    assert ret.kept("a") == (2, 500)
    assert ret.admit("a", "t3") == [("a", "t2")]  # an admission ends within the caps
    assert ret.kept("a") == (2, 0)


def test_a_refused_admission_changes_nothing() -> None:
    ret = Retention(max_tasks=2, max_bytes=100, total_tasks=4, total_bytes=1000)
    ret.admit("a", "t1", 10)
    _done(ret, "t1", 10)
    ret.admit("b", "u1", 10)
    ret.admit("b", "u2", 10)
    ret.admit("c", "v1", 10)
    with pytest.raises(RetentionLimitExceeded):
        ret.admit("b", "u3", 10)  # b's own budget is full of running tasks
    assert ret.kept("a") == (1, 10) and ret.kept("b") == (2, 20) and len(ret) == 4


def test_forgetting_leaves_nothing_behind() -> None:
    """Budgets of requestors whose tasks are all gone are forgotten: many sessions leave no
    memory in the ledger."""
    ret = Retention(max_tasks=5, max_bytes=100, total_tasks=50, total_bytes=500)
    for s in range(20):
        ret.admit(f"session:{s}", f"t{s}", 3, budget=f"address:{s % 3}")
        if s % 2:
            _done(ret, f"t{s}", 4)
    for s in range(20):
        ret.forget(f"t{s}")
    ret.forget("never-there")
    assert (len(ret), ret.bytes) == (0, 0)
    assert not ret._budgets and not ret._finished


def test_the_ledger_stays_consistent_under_random_use() -> None:
    """A seeded random walk of admissions, ends and expiries: the counts are the sum of what
    is noted, every bound holds after each admission, and a drop is always of a finished
    task."""
    rng = random.Random(4)
    ret = Retention(max_tasks=6, max_bytes=300, total_tasks=15, total_bytes=700)
    live: dict[str, tuple[str, bool, int]] = {}  # task -> (budget, finished, size)
    for step in range(3000):
        roll = rng.random()
        if roll < 0.5:
            budget = f"b{rng.randrange(5)}"
            tid = f"t{step}"
            size = rng.randrange(0, 80)
            try:
                dropped = ret.admit(f"r{rng.randrange(20)}", tid, size, budget=budget)
            except RetentionLimitExceeded:
                continue
            for _, gone in dropped:
                assert live.pop(gone)[1], "a running task was dropped"
            live[tid] = (budget, False, size)
            assert ret.kept(budget)[0] <= 6 and len(ret) <= 15
            assert ret.kept(budget)[1] <= 300 and ret.bytes <= 700
        elif roll < 0.85 and live:
            tid = rng.choice(sorted(t for t, v in live.items() if not v[1]) or [""])
            if tid:
                size = rng.randrange(0, 150)
                for _, gone in ret.finished(tid, size):
                    assert gone != tid and live.pop(gone)[1]
                live[tid] = (live[tid][0], True, size)
        elif live:
            tid = rng.choice(sorted(live))
            ret.forget(tid)
            del live[tid]
        assert len(ret) == len(live)
        assert ret.bytes == sum(v[2] for v in live.values())
        for b in {v[0] for v in live.values()}:
            mine = [v for v in live.values() if v[0] == b]
            assert ret.kept(b) == (len(mine), sum(v[2] for v in mine))


def test_an_outcome_counts_its_status_message() -> None:
    assert outcome_size({"a": 1}, None) == 7
    assert outcome_size(None, None, "é" * 10) == 20  # UTF-8
    assert outcome_size({"a": 1}, {"code": 1}, "x") == 7 + 10 + 1


# --------------------------------------------------------------------------- the engine


async def _instant(tc: TaskContext) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": "x" * 100}]}


@pytest.mark.anyio
async def test_engine_drops_another_requestors_task_of_the_shared_budget() -> None:
    """Through ``TaskEngine.start(budget=...)``: a session's finished task dropped for
    another session of the same address answers "Task has expired" to its owner; held
    arguments count while a task runs."""
    cfg = EngineConfig(max_active_per_requestor=2, max_tasks_per_requestor=2)
    addr = "address:10.0.0.9"
    async with TaskEngine(config=cfg) as engine:
        ids = []
        for owner in ("session:a", "session:b", "session:b"):
            rec = await engine.start(
                owner, REVISION, TOOLS_CALL, _instant, tool_error=FAILED, budget=addr,
                held_bytes=1234,
            )  # fmt: skip
            assert engine.retention.kept(addr)[1] >= 1234
            await engine.wait_terminal(owner, rec.task_id)
            ids.append(rec.task_id)
        with pytest.raises(TaskExpired):
            await engine.record("session:a", ids[0])
        assert (await engine.record("session:b", ids[2])).status.value == "completed"
        assert engine.retention.kept(addr)[0] == len(engine.retention) == 2
