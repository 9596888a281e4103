"""Soak test of the example server: mixed traffic from many sessions.

    PYTHONPATH=tests .venv/bin/python -m testkit.soak                    # 10 minutes (default)
    PYTHONPATH=tests .venv/bin/python -m testkit.soak --soak-seconds 30  # as CI (via pytest)

N sessions (default 50, each its own requestor) create tasks, poll them honouring
``pollInterval``, fetch results, answer ``input_required`` elicitations on the
``tasks/result`` stream, list, cancel. The server runs with a short ttl; after the
traffic stops the tasks expire, every session's ``tasks/list`` must be empty and
the server's memory must come back near its baseline. Nothing may be lost: every
task created reaches a verified end, every completed task's result is fetched
exactly once and matches what the tool promises.

Prints throughput, p99 latency and server memory (RSS) at start, peak and end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from testkit.doors import ENDPOINT, FRONT_DOORS
from testkit.sec_harness import ACCEPT, PROTOCOL, HttpServer, init_request, parse_body, rss_kb
from testkit.wait import WaitTimeout, until_async

DEFAULT_SECONDS = 600.0
#: Seconds past the ttl for the sweep (every second) to remove every task: a deadline, not
#: a pause (the wait ends as soon as nothing is left)
EXPIRY_GRACE_S = 30.0
ENV_SECONDS = "MCPTASK_SOAK_SECONDS"
TERMINAL = {"completed", "failed", "cancelled"}


@dataclass
class Stats:
    latencies: list[float] = field(default_factory=list)  # seconds, every request but streams
    requests: int = 0
    tasks: dict[str, int] = field(default_factory=dict)  # kind -> verified tasks
    created: int = 0
    results_fetched: dict[str, int] = field(default_factory=dict)  # task id -> fetches
    problems: list[str] = field(default_factory=list)
    peak_rss_kb: int = 0
    ttl_s: float = 10.0
    #: tasks that expired before their result was fetched, at least ttl after creation (as
    #: the ttl promises: the requestor was too slow, not a loss)
    expired_in_time: int = 0


class Expired(Exception):
    """A task of ours expired after its full ttl."""


class Session:
    """One MCP session over raw Streamable HTTP (async)."""

    def __init__(self, http: httpx.AsyncClient, url: str, stats: Stats, rng: random.Random) -> None:
        self.http = http
        self.url = url
        self.stats = stats
        self.rng = rng
        self.sid = ""
        self.next_id = 0
        self.mine: dict[str, float] = {}  # task id -> created (monotonic)

    def headers(self) -> dict[str, str]:
        h = {"Accept": ACCEPT, "Content-Type": "application/json"}
        if self.sid:
            h["mcp-session-id"] = self.sid
            h["mcp-protocol-version"] = PROTOCOL
        return h

    async def start(self) -> None:
        r = await self.http.post(self.url, headers=self.headers(), json=init_request())
        r.raise_for_status()
        self.sid = r.headers["mcp-session-id"]
        await self.http.post(
            self.url,
            headers=self.headers(),
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
        )

    async def close(self) -> None:
        await self.http.delete(self.url, headers=self.headers())

    async def gone(self) -> bool:
        """Whether the server ended this session (it answers 404 for its id)."""
        ping = {"jsonrpc": "2.0", "id": 0, "method": "ping"}
        r = await self.http.post(self.url, headers=self.headers(), json=ping)
        return r.status_code == 404

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        rid = self.next_id
        body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        t0 = time.perf_counter()
        r = await self.http.post(self.url, headers=self.headers(), json=body)
        self.stats.latencies.append(time.perf_counter() - t0)
        self.stats.requests += 1
        for msg in parse_body(r.headers.get("content-type", ""), r.text):
            if msg.get("id") == rid and "method" not in msg:
                return msg
        raise RuntimeError(f"{method}: no answer (HTTP {r.status_code}) {r.text[:200]}")

    async def ok(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        resp = await self.call(method, params)
        if "result" not in resp:
            raise RuntimeError(f"{method} {params}: {resp.get('error')}")
        result: dict[str, Any] = resp["result"]
        return result

    async def create(self, tool: str, args: dict[str, Any]) -> str:
        # the task's age is counted from before its creation was sent: the server created it
        # at some moment until the answer came, so a slow answer makes it look younger than
        # it is, and its expiry at the full ttl would be taken for an early one
        sent = time.monotonic()
        res = await self.ok("tools/call", {"name": tool, "arguments": args, "task": {}})
        tid = str(res["task"]["taskId"])
        self.mine[tid] = sent
        self.stats.created += 1
        return tid

    def expired_in_time(self, tid: str, answer: dict[str, Any]) -> bool:
        err = answer.get("error") or {}
        age = time.monotonic() - self.mine.get(tid, time.monotonic())
        return "expired" in str(err.get("message", "")) and age >= self.stats.ttl_s - 0.05

    async def poll(self, tid: str, until: set[str]) -> dict[str, Any]:
        while True:
            answer = await self.call("tasks/get", {"taskId": tid})
            if self.expired_in_time(tid, answer):
                raise Expired(tid)
            if "result" not in answer:
                raise RuntimeError(f"tasks/get {tid}: {answer.get('error')}")
            task: dict[str, Any] = answer["result"]
            if task["status"] in until or task["status"] in TERMINAL:
                return task
            await asyncio.sleep(task.get("pollInterval", 500) / 1000)  # as the server asks

    async def result(self, tid: str) -> dict[str, Any]:
        self.stats.results_fetched[tid] = self.stats.results_fetched.get(tid, 0) + 1
        return await self.call("tasks/result", {"taskId": tid})

    async def result_answering(self, tid: str, accept: bool) -> dict[str, Any]:
        """``tasks/result`` as a stream: answer the elicitation that arrives on it (R-INPUT-3)."""
        self.stats.results_fetched[tid] = self.stats.results_fetched.get(tid, 0) + 1
        self.next_id += 1
        rid = self.next_id
        body = {"jsonrpc": "2.0", "id": rid, "method": "tasks/result", "params": {"taskId": tid}}
        async with self.http.stream("POST", self.url, headers=self.headers(), json=body) as r:
            data: list[str] = []
            async for line in r.aiter_lines():
                if line.startswith("data:"):
                    data.append(line[5:].lstrip())
                    continue
                if line or not data:
                    continue
                msg = json.loads("\n".join(data))
                data = []
                if "method" in msg and "id" in msg:  # the task's elicitation/create
                    meta = msg["params"].get("_meta", {})
                    if meta.get("io.modelcontextprotocol/related-task") != {"taskId": tid}:
                        self.stats.problems.append(f"elicitation without related-task: {msg}")
                    answer: dict[str, Any] = (
                        {"action": "accept", "content": {"confirm": True}}
                        if accept
                        else {"action": "decline"}
                    )
                    reply = {"jsonrpc": "2.0", "id": msg["id"], "result": answer}
                    t0 = time.perf_counter()
                    await self.http.post(self.url, headers=self.headers(), json=reply)
                    self.stats.latencies.append(time.perf_counter() - t0)
                    self.stats.requests += 1
                elif msg.get("id") == rid:
                    return dict(msg)
        raise RuntimeError(f"tasks/result stream of {tid} ended without an answer")

    # ---------------------------------------------------------------- one unit of traffic
    async def step(self) -> None:
        try:
            await self._step()
        except Expired:
            self.stats.expired_in_time += 1

    async def _step(self) -> None:
        r = self.rng.random()
        if r < 0.5:
            seconds = self.rng.choice([0, 0.05, 0.2, 0.5])
            label = f"s{self.rng.getrandbits(48):x}"
            tid = await self.create("slow_compute", {"seconds": seconds, "label": label})
            task = await self.poll(tid, set())
            res = await self.result(tid)
            want = f"done after {seconds:g}s ({label})"
            ok = (
                task["status"] == "completed"
                and res.get("result", {}).get("content", [{}])[0].get("text") == want
            )
            self.check(ok, "slow_compute", tid, res)
        elif r < 0.6:
            tid = await self.create("failing_job", {})
            task = await self.poll(tid, set())
            res = await self.result(tid)
            ok = task["status"] == "failed" and res.get("result", {}).get("isError") is True
            self.check(ok, "failing_job", tid, res)
        elif r < 0.72:
            path = f"/tmp/{self.rng.getrandbits(32):x}"
            accept = self.rng.random() < 0.5
            tid = await self.create("confirm_delete", {"path": path})
            task = await self.poll(tid, {"input_required"})
            res = await self.result_answering(tid, accept)
            want = f"{'deleted' if accept else 'kept'} {path}"
            text = res.get("result", {}).get("content", [{}])[0].get("text")
            self.check(
                task["status"] == "input_required" and text == want, "input_required", tid, res
            )
        elif r < 0.84:
            tid = await self.create("slow_compute", {"seconds": 30})
            await asyncio.sleep(self.rng.random() * 0.3)  # cancel at a random moment of its run
            cancelled = await self.ok("tasks/cancel", {"taskId": tid})
            res = await self.result(tid)
            ok = cancelled["status"] == "cancelled" and res.get("error", {}).get("code") == -32800
            self.check(ok, "cancelled", tid, res)
        else:
            await self.list_check()

    def check(self, ok: bool, kind: str, tid: str, res: dict[str, Any]) -> None:
        if ok:
            self.stats.tasks[kind] = self.stats.tasks.get(kind, 0) + 1
        elif self.expired_in_time(tid, res):
            self.stats.expired_in_time += 1
        else:
            self.stats.problems.append(f"{kind} {tid}: {str(res)[:300]}")

    async def list_all(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        cursor = None
        while True:
            page = await self.ok("tasks/list", {"cursor": cursor} if cursor else {})
            out += page["tasks"]
            cursor = page.get("nextCursor")
            if not cursor:
                return out

    async def list_check(self) -> None:
        listed = {t["taskId"] for t in await self.list_all()}
        foreign = listed - set(self.mine)
        if foreign:
            self.stats.problems.append(f"tasks/list shows {len(foreign)} tasks of another session")
        self.stats.tasks["list"] = self.stats.tasks.get("list", 0) + 1


async def _listed(sessions: list[Session]) -> int:
    return sum([len(await s.list_all()) for s in sessions])


async def _expired(sessions: list[Session], ttl_s: float) -> int:
    """The tasks the sessions still list once they should all have expired: polls until
    none is left (every ttl passed and the sweep ran), for at most ``ttl_s`` plus a
    generous grace; 0 when all is well."""
    try:
        await until_async(
            lambda: _listed(sessions),
            ttl_s + EXPIRY_GRACE_S,
            satisfied=lambda left: left == 0,
            interval=0.5,
            what="every task expired",
        )
    except WaitTimeout:
        return await _listed(sessions)
    return 0


async def _closed(sessions: list[Session]) -> None:
    """Close the sessions (DELETE); return once the server ended every one of them."""
    for s in sessions:
        await s.close()
    for s in sessions:
        await until_async(s.gone, what=f"session {s.sid} ended")


def _p(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


async def _traffic(
    url: str, pid: int, seconds: float, sessions: int, seed: int, stats: Stats
) -> list[Session]:
    # keep-alive shorter than uvicorn's 5 s: never reuse a connection the server is closing
    limits = httpx.Limits(
        max_connections=sessions * 3, max_keepalive_connections=sessions * 2, keepalive_expiry=2.0
    )
    http = httpx.AsyncClient(timeout=httpx.Timeout(120), limits=limits)
    all_sessions = [Session(http, url, stats, random.Random(seed + i)) for i in range(sessions)]
    for s in all_sessions:
        await s.start()
    deadline = time.monotonic() + seconds

    async def run(s: Session) -> None:
        while time.monotonic() < deadline:
            try:
                await s.step()
            except Exception as exc:  # every failure is a finding
                stats.problems.append(f"{type(exc).__name__}: {exc}"[:300])

    async def sample_memory() -> None:
        while time.monotonic() < deadline:
            stats.peak_rss_kb = max(stats.peak_rss_kb, rss_kb(pid))
            await asyncio.sleep(1)  # one sample a second

    await asyncio.gather(sample_memory(), *(run(s) for s in all_sessions))
    return all_sessions


def run_soak(
    seconds: float,
    *,
    sessions: int = 50,
    ttl_ms: int = 10_000,
    seed: int = 8,
    log_dir: Path | None = None,
    front_door: str = ENDPOINT,
) -> dict[str, Any]:
    """Run the soak against a fresh example server, its task requests through ``front_door``;
    returns the report (see ``main``)."""
    log_dir = log_dir or Path(tempfile.mkdtemp(prefix="soak-"))
    config = {
        "default_ttl_ms": ttl_ms,
        "max_ttl_ms": ttl_ms,
        "rate_limit_calls": 100_000,
    }
    # The sessions share one client address, so one budget of tasks kept (R-SEC-4): room for
    # every task the traffic keeps alive within its ttl, as many as the server keeps in all.
    kept = ("--max-tasks", "100000")
    server = HttpServer(*kept, log_dir=log_dir, front_door=front_door, engine_config=config).start()
    try:
        stats = Stats(ttl_s=ttl_ms / 1000)

        async def main() -> dict[str, Any]:
            # warm-up: imports, caches, first allocations; then the baseline
            warm_s = min(10.0, max(4.0, seconds / 8))
            warm = await _traffic(
                server.url, server.pid, warm_s, sessions, seed + 10_000, Stats(ttl_s=ttl_ms / 1000)
            )
            await _expired(warm, ttl_ms / 1000)
            await _closed(warm)
            start_rss = rss_kb(server.pid)
            t0 = time.monotonic()
            live = await _traffic(server.url, server.pid, seconds, sessions, seed, stats)
            elapsed = time.monotonic() - t0
            # let everything expire, then nothing may be left
            leftover = await _expired(live, ttl_ms / 1000)
            end_rss_open = rss_kb(server.pid)
            await _closed(live)
            end_rss = rss_kb(server.pid)
            verified = sum(v for k, v in stats.tasks.items() if k != "list")
            lost = stats.created - verified - stats.expired_in_time
            return {
                "front_door": front_door,
                "seconds": round(elapsed, 1),
                "sessions": sessions,
                "requests": stats.requests,
                "throughput_rps": round(stats.requests / elapsed, 1),
                "tasks_created": stats.created,
                "tasks_per_s": round(stats.created / elapsed, 1),
                "verified": dict(stats.tasks),
                "p50_ms": round(_p(stats.latencies, 0.50) * 1000, 1),
                "p99_ms": round(_p(stats.latencies, 0.99) * 1000, 1),
                "rss_start_kb": start_rss,
                "rss_peak_kb": max(stats.peak_rss_kb, start_rss),
                "rss_end_sessions_open_kb": end_rss_open,
                "rss_end_kb": end_rss,
                "left_after_expiry": leftover,
                "lost": lost,
                "expired_before_fetch": stats.expired_in_time,
                "fetched_twice": sum(1 for v in stats.results_fetched.values() if v != 1),
                "problems": stats.problems[:20],
                "problem_count": len(stats.problems),
            }

        report = asyncio.run(main())
        report["server_alive"] = server.alive()
        report["server_log_tracebacks"] = server.log().count("Traceback")
        return report
    finally:
        server.stop()


def format_report(r: dict[str, Any]) -> str:
    return (
        f"soak ({r['front_door']}) {r['seconds']}s, {r['sessions']} sessions: {r['requests']} requests "
        f"({r['throughput_rps']}/s), {r['tasks_created']} tasks ({r['tasks_per_s']}/s), "
        f"p50 {r['p50_ms']} ms, p99 {r['p99_ms']} ms; server RSS start {r['rss_start_kb'] // 1024} MiB, "
        f"peak {r['rss_peak_kb'] // 1024} MiB, end {r['rss_end_kb'] // 1024} MiB; "
        f"lost {r['lost']}, expired unfetched after their ttl {r['expired_before_fetch']}, "
        f"left after expiry {r['left_after_expiry']}, "
        f"problems {r['problem_count']}; verified {r['verified']}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--soak-seconds",
        type=float,
        default=float(os.environ.get(ENV_SECONDS, DEFAULT_SECONDS)),
        help=f"traffic duration (default {DEFAULT_SECONDS:g}, or ${ENV_SECONDS})",
    )
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--ttl-ms", type=int, default=30_000)
    parser.add_argument(
        "--front-door", choices=FRONT_DOORS, default=ENDPOINT, help="the task requests' door"
    )
    args = parser.parse_args(argv)
    report = run_soak(
        args.soak_seconds, sessions=args.sessions, ttl_ms=args.ttl_ms, front_door=args.front_door
    )
    print(json.dumps(report, indent=2))
    print(format_report(report))
    bad = report["lost"] or report["problem_count"] or report["left_after_expiry"]
    return 1 if bad or not report["server_alive"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
