"""What one requestor can cost the others: memory, latency, descriptors and sessions.

    .venv/bin/python benchmarks/bench_isolation.py [--creates 200000] [--quick]

Runs the example server (``python -m mcp_tasks.examples.server``) as a subprocess on
127.0.0.1 and prints, each against a baseline measured in the same run:

1. **RSS after a flood of creates by one requestor** (one bearer token, ``failing_job`` on
   the 2026-07-28 face, as fast as the client can, the rate limit opened wide so that only
   the retention caps bound it): the server's RSS before and after, with the default caps
   (``max_tasks_per_requestor``, ``max_result_bytes_per_requestor``) and, as the baseline,
   with the caps opened wide (what the server did before it had them).
2. **Another requestor's latency during a flood**: bob's ``tasks/get`` of his own task,
   p50/p99, alone and while alice floods ``tasks/get`` and creates with the default limits
   (she is rate-limited; bob must not be); the ratio, and how many of bob's were refused.
3. **Descriptors and sessions under slowloris**: the server's open descriptors with N
   connections from one address (127.0.0.2) sending a request head that never ends (those
   past the address's connection cap refused at once), and after ``--header-timeout``;
   whether a new client is served meanwhile; one token opening sessions to its cap, and
   whether another token still opens one.

Figures vary with the machine's load (two shared cores here); the ratios within one run
are the steadier part.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

SERVER = [sys.executable, "-m", "mcp_tasks.examples.server"]
EXT = "2026-07-28"
META = "io.modelcontextprotocol/"
TOKENS = {"tok-alice": "alice", "tok-bob": "bob", "tok-carol": "carol"}
ACCEPT = "application/json, text/event-stream"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """The example server on a free port; stopped by PID."""

    def __init__(self, *args: str, tokens: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.log = tempfile.TemporaryFile()
        cmd = [*SERVER, "--http", f"127.0.0.1:{self.port}", "--tokens", str(tokens), *args]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.log.seek(0)
                raise SystemExit(f"server exited: {self.log.read().decode()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.1)
        raise SystemExit("server did not listen within 60 s")

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError("no VmRSS")

    def fds(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def ext_body(method: str, params: dict[str, Any], rid: int) -> bytes:
    params = {
        **params,
        "_meta": {
            f"{META}protocolVersion": EXT,
            f"{META}clientInfo": {"name": "bench-isolation", "version": "0"},
            f"{META}clientCapabilities": {"extensions": {f"{META}tasks": {}}},
        },
    }
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode()


def ext_headers(token: str, method: str, name: str | None = None) -> dict[str, str]:
    head = {
        "Authorization": f"Bearer {token}",
        "Accept": ACCEPT,
        "Content-Type": "application/json",
        "MCP-Protocol-Version": EXT,
        "Mcp-Method": method,
    }
    if name is not None:
        head["Mcp-Name"] = name
    return head


async def flood_creates(url: str, token: str, total: int, concurrency: int = 16) -> tuple[int, int]:
    """``total`` creates of ``failing_job``; (accepted, refused)."""
    body = ext_body("tools/call", {"name": "failing_job", "arguments": {}}, 1)
    head = ext_headers(token, "tools/call", "failing_job")
    counts = [0, 0]
    left = [total]

    async def worker(client: httpx.AsyncClient) -> None:
        while left[0] > 0:
            left[0] -= 1
            answer = (await client.post(url, content=body, headers=head)).json()
            counts[0 if "result" in answer else 1] += 1

    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
    return counts[0], counts[1]


def rss_figures(tokens: Path, creates: int) -> None:
    print(f"\n1. RSS after {creates:,} creates of failing_job by one token (2026-07-28 face)")
    runs = {
        "caps opened wide (the baseline)": [
            "--max-active", "1000000", "--max-tasks", "100000000",
            "--max-result-bytes-per-requestor", str(1 << 40),
            "--max-tasks-total", "100000000", "--max-result-bytes-total", str(1 << 40),
        ],
        "default caps (1,000 tasks, 64 MiB)": [],
    }  # fmt: skip
    grown: dict[str, float] = {}
    for label, args in runs.items():
        server = Server("--rate-limit", "1000000000/10", *args, tokens=tokens)
        try:
            before = server.rss_mib()
            t0 = time.perf_counter()
            ok, refused = asyncio.run(flood_creates(server.url, "tok-alice", creates))
            took = time.perf_counter() - t0
            time.sleep(1.0)  # the last tasks end
            after = server.rss_mib()
        finally:
            server.stop()
        grown[label] = after - before
        print(
            f"   {label}: RSS {before:.0f} -> {after:.0f} MiB (+{after - before:.0f}),"
            f" {ok:,} created, {refused:,} refused, {ok / took:,.0f} creates/s"
        )
    base, capped = grown.values()
    print(f"   growth with the caps / without: {capped / base:.3f}" if base > 0 else "")


def _get_latency(client: httpx.Client, url: str, tid: str, n: int) -> tuple[list[float], int]:
    body = ext_body("tasks/get", {"taskId": tid}, 2)
    head = ext_headers("tok-bob", "tasks/get", tid)
    samples, refused = [], 0
    for _ in range(n):
        t0 = time.perf_counter()
        answer = client.post(url, content=body, headers=head).json()
        samples.append((time.perf_counter() - t0) * 1000)
        refused += "error" in answer
    return samples, refused


async def _alice_floods(url: str, stop: asyncio.Event) -> int:
    body = ext_body("tasks/get", {"taskId": "x" * 22}, 3)
    head = ext_headers("tok-alice", "tasks/get", "x" * 22)
    sent = [0]

    async def worker(client: httpx.AsyncClient) -> None:
        while not stop.is_set():
            await client.post(url, content=body, headers=head)
            sent[0] += 1

    async with httpx.AsyncClient(timeout=60) as client:
        await asyncio.gather(*(worker(client) for _ in range(8)))
    return sent[0]


def _pct(samples: list[float], q: float) -> float:
    return statistics.quantiles(samples, n=100)[int(q) - 1]


def latency_figures(tokens: Path, n: int) -> None:
    print("\n2. bob's tasks/get latency while alice floods (default limits)")
    server = Server(tokens=tokens)
    try:
        with httpx.Client(timeout=60) as bob:
            created = bob.post(
                server.url,
                content=ext_body("tools/call", {"name": "slow_compute", "arguments": {"seconds": 600}}, 1),
                headers=ext_headers("tok-bob", "tools/call", "slow_compute"),
            ).json()["result"]
            tid = created["taskId"]
            alone, refused_alone = _get_latency(bob, server.url, tid, n)

            import threading

            loop = asyncio.new_event_loop()
            stop = asyncio.Event()
            sent: list[int] = []
            thread = threading.Thread(
                target=lambda: sent.append(loop.run_until_complete(_alice_floods(server.url, stop)))
            )
            thread.start()
            time.sleep(1.0)  # the flood is under way
            during, refused_during = _get_latency(bob, server.url, tid, n)
            loop.call_soon_threadsafe(stop.set)
            thread.join()
    finally:
        server.stop()
    p50a, p99a, p50d, p99d = _pct(alone, 50), _pct(alone, 99), _pct(during, 50), _pct(during, 99)
    print(f"   alone:  p50 {p50a:.2f} ms, p99 {p99a:.2f} ms, refused {refused_alone}")
    print(
        f"   during: p50 {p50d:.2f} ms, p99 {p99d:.2f} ms, refused {refused_during}"
        f" (alice sent {sent[0] if sent else 0:,} requests, nearly all rate-limited)"
    )
    print(f"   during / alone: p50 {p50d / p50a:.2f}, p99 {p99d / p99a:.2f}")


def slowloris_figures(tokens: Path, conns: int, sessions: int) -> None:
    print(f"\n3. slowloris: {conns:,} connections whose request head never ends")
    server = Server(
        "--header-timeout", "5", "--max-sessions-per-requestor", str(sessions), tokens=tokens
    )
    try:
        base = server.fds()
        socks = []
        for _ in range(conns):
            # from another loopback address than the new client's: one address's connections
            # are capped (--max-connections-per-address), the rest refused at once
            sock = socket.create_connection(
                ("127.0.0.1", server.port), source_address=("127.0.0.2", 0)
            )
            sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127")
            socks.append(sock)
        time.sleep(0.5)
        held = server.fds()
        t0 = time.perf_counter()
        with httpx.Client(timeout=60) as fresh:
            answer = fresh.post(
                server.url,
                content=ext_body("tools/list", {}, 1),
                headers=ext_headers("tok-carol", "tools/list"),
            )
        served_ms = (time.perf_counter() - t0) * 1000
        deadline = time.monotonic() + 60
        while server.fds() > base + 5 and time.monotonic() < deadline:
            time.sleep(0.2)
        after = server.fds()
        for sock in socks:
            sock.close()
        print(
            f"   server descriptors: {base} at rest, {held} with them held,"
            f" {after} after the 5 s head deadline"
        )
        print(f"   a new client meanwhile: HTTP {answer.status_code} in {served_ms:.1f} ms")

        print(f"\n   sessions: bob opens {sessions + 1} (cap {sessions} per requestor)")
        init = {
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "bench", "version": "0"}},
        }  # fmt: skip
        codes: dict[int, int] = {}
        rss0 = server.rss_mib()
        with httpx.Client(timeout=60) as http:
            for _ in range(sessions + 1):
                r = http.post(
                    server.url, json=init,
                    headers={"Authorization": "Bearer tok-bob", "Accept": ACCEPT},
                )  # fmt: skip
                codes[r.status_code] = codes.get(r.status_code, 0) + 1
            alice = http.post(
                server.url, json=init,
                headers={"Authorization": "Bearer tok-alice", "Accept": ACCEPT},
            )  # fmt: skip
        print(
            f"   bob's answers: {codes}; alice then: HTTP {alice.status_code};"
            f" RSS +{server.rss_mib() - rss0:.0f} MiB for bob's {sessions} sessions"
        )
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--creates", type=int, default=200_000)
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke run)")
    args = parser.parse_args()
    creates, samples, conns, sessions = (
        (2_000, 50, 50, 5) if args.quick else (args.creates, 400, 2_000, 1_000)
    )
    print(f"machine: {platform.platform()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as tmp:
        tokens = Path(tmp) / "tokens.json"
        tokens.write_text(json.dumps(TOKENS))
        rss_figures(tokens, creates)
        latency_figures(tokens, samples)
        slowloris_figures(tokens, conns, sessions)


if __name__ == "__main__":
    main()
