"""Outage runs: example servers under load on both faces while their store blinks, then
every task the servers acknowledged checked, exactly.

Each run starts the example server (two instances on one Redis namespace for the Redis
runs, bound to one bearer-token subject) and client threads that create ``slow_compute``
tasks (0 to 3 s) on the 2025-11-25 face and the tasks extension's face, while other
threads hold ``tasks/result`` calls on the instance that did not create the task. Meanwhile
the store blinks:

- ``redis-short``: Redis (append-only, fsync always) stopped 5 s, shorter than the lease;
- ``redis-long``: the same, the lease 2 s: the outage is longer than the lease;
- ``redis-volatile``: Redis without persistence stopped 5 s (its restart loses every task);
- ``sqlite-lock``: another process holds ``BEGIN EXCLUSIVE`` on the SQLite file 12 s
  (more than twice its 5 s busy timeout: writes fail, then fail again).

Then every acknowledged task (a ``CreateTaskResult`` received) is polled until terminal and
counted: completed exactly (its own ``done after Ns (label)``), failed with a reason,
lost with the store (not found: only when Redis itself lost its data), stuck (not terminal
at the deadline), wrong (anything else). Creations refused meanwhile answered ``-32603``
"Task store unavailable" (the client was told; nothing was acknowledged). Held
``tasks/result`` calls must answer the exact result or "Task store unavailable", nothing
else. ``tests/mcp/test_store_outages.py`` runs them with bounded counts; run this file to
print the counts::

    .venv/bin/python -m testkit.outage_runs [--seconds 8] [--front-door sdk] [RUN ...]

(from ``tests/``, or with ``tests`` on ``PYTHONPATH``)

Processes are stopped by PID; nothing here asserts on timing.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from testkit.blinks import SqliteLock
from testkit.doors import FRONT_DOORS
from testkit.example_server import HttpServer
from testkit.ext_wire import ExtClient
from testkit.procs import running
from testkit.redis_fixtures import RedisServer

TOKENS = {"tok-alice": "alice"}
AUTH = {"Authorization": "Bearer tok-alice"}
CORE, EXT = "2025-11-25", "2026-07-28"
TERMINAL = frozenset({"completed", "failed", "cancelled"})
UNAVAILABLE = "Task store unavailable"
RUNS = ("redis-short", "redis-long", "redis-volatile", "sqlite-lock")


# --------------------------------------------------------------------------- the wire


class CoreClient:
    """A 2025-11-25 Streamable HTTP session (JSON or SSE answers), bearer token alice."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.http = httpx.Client(timeout=httpx.Timeout(120.0))
        self.ids = itertools.count(1)
        self.head = {"Accept": "application/json, text/event-stream", **AUTH}
        init = {
            "protocolVersion": CORE,
            "capabilities": {},
            "clientInfo": {"name": "outage-runs", "version": "1"},
        }
        r = self.http.post(url, json=self._msg("initialize", init), headers=self.head)
        r.raise_for_status()
        self.head["mcp-session-id"] = r.headers["mcp-session-id"]
        self.head["mcp-protocol-version"] = CORE
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        self.http.post(url, json=note, headers=self.head)

    def _msg(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": next(self.ids), "method": method, "params": params}

    def send(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        msg = self._msg(method, params)
        body = json.dumps(msg).encode()  # JSON-escaped: any text, as any JSON encoder may
        head = {**self.head, "Content-Type": "application/json"}
        r = self.http.post(self.url, content=body, headers=head)
        if r.headers.get("content-type", "").startswith("text/event-stream"):
            for line in r.text.splitlines():
                if line.startswith("data:"):
                    answer: dict[str, Any] = json.loads(line[5:])
                    if answer.get("id") == msg["id"]:
                        return answer
            raise AssertionError(f"{method}: no answer in {r.text[:300]!r}")
        out: dict[str, Any] = r.json()
        return out

    def close(self) -> None:
        self.http.close()


def create(client: CoreClient | ExtClient, face: str, args: dict[str, Any]) -> dict[str, Any]:
    """The ``tools/call`` answer that creates a task on ``face``."""
    if face == CORE:
        assert isinstance(client, CoreClient)
        call = {"name": "slow_compute", "arguments": args, "task": {}}
        return client.send("tools/call", call)
    assert isinstance(client, ExtClient)
    return client.send("tools/call", {"name": "slow_compute", "arguments": args})


def task_id_of(face: str, answer: dict[str, Any]) -> str | None:
    result = answer.get("result")
    if not isinstance(result, dict):
        return None
    tid = result["task"]["taskId"] if face == CORE else result.get("taskId")
    return str(tid) if tid else None


def is_unavailable(answer: dict[str, Any]) -> bool:
    err = answer.get("error")
    return isinstance(err, dict) and err.get("code") == -32603 and err.get("message") == UNAVAILABLE


# --------------------------------------------------------------------------- processes


def example_server(store: str, tokens: Path, log_dir: Path, front_door: str) -> HttpServer:
    """The example server on ``store`` behind ``front_door``, bound to one bearer-token
    subject, its limits out of the way of the load."""
    return HttpServer(
        "--store", store, "--tokens", str(tokens),
        "--max-active", "100000", "--rate-limit", "1000000/10",
        log_dir=log_dir, front_door=front_door,
    )  # fmt: skip


# --------------------------------------------------------------------------- one run


@dataclass
class Task:
    face: str
    server: int
    task_id: str
    text: str


@dataclass
class Counts:
    run: str
    acknowledged: int = 0
    refused_unavailable: int = 0
    #: outcomes the store did not take when the work ended, kept and written again (the
    #: servers' logs): how much of the run went through the blink
    kept: int = 0
    completed_exactly: int = 0
    failed_with_reason: int = 0
    lost_with_the_store: int = 0
    stuck: int = 0
    wrong: int = 0
    #: held tasks/result calls: "exact result" / "store unavailable" / anything else
    held: Counter[str] = field(default_factory=Counter)
    reasons: Counter[str] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)

    def line(self) -> str:
        held = ", ".join(f"{k} {v}" for k, v in sorted(self.held.items())) or "none"
        return (
            f"{self.run}: acknowledged {self.acknowledged}, completed exactly "
            f"{self.completed_exactly}, failed with reason {self.failed_with_reason}, lost "
            f"with the store {self.lost_with_the_store}, stuck {self.stuck}, wrong "
            f"{self.wrong}; creations refused 'Task store unavailable' "
            f"{self.refused_unavailable}; outcomes kept through the blink {self.kept}; held "
            f"tasks/result: {held}"
        )


class Load:
    """Client threads creating tasks on both faces of every server, and holders."""

    def __init__(self, urls: list[str], counts: Counts, seed: int = 0) -> None:
        self.urls, self.counts = urls, counts
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.tasks: list[Task] = []
        self.seed = seed

    def creator(self, server: int, face: str, n: int) -> None:
        rng = random.Random(f"{self.seed}-{server}-{face}-{n}")
        url = self.urls[server]
        client: CoreClient | ExtClient = (
            CoreClient(url) if face == CORE else ExtClient(url, 120, AUTH)
        )
        try:
            for i in itertools.count():
                if self.stop.is_set():
                    return
                secs = rng.choice([0, 0.2, 0.5, 1, 2, 3])
                label = f"{self.counts.run}-{server}-{face}-{n}-{i}"
                try:
                    answer = create(client, face, {"seconds": secs, "label": label})
                except httpx.HTTPError as exc:
                    self.note(f"create: {exc!r}")
                    continue
                tid = task_id_of(face, answer)
                with self.lock:
                    if tid is not None:
                        self.counts.acknowledged += 1
                        self.tasks.append(
                            Task(face, server, tid, f"done after {secs:g}s ({label})")
                        )
                    elif is_unavailable(answer):
                        self.counts.refused_unavailable += 1
                    else:
                        self.counts.wrong += 1
                        self.counts.problems.append(f"create answered {answer}")
                time.sleep(0.05)
        finally:
            client.close()

    def holder(self, server: int) -> None:
        """``tasks/result`` on ``server`` for core tasks another instance created."""
        client = CoreClient(self.urls[server])
        seen: set[str] = set()
        try:
            while not self.stop.is_set():
                with self.lock:
                    mine = [t for t in self.tasks[-20:] if t.face == CORE and t.task_id not in seen]
                    theirs = [t for t in mine if t.server != server or len(self.urls) == 1]
                if not theirs:
                    time.sleep(0.05)
                    continue
                task = theirs[-1]
                seen.add(task.task_id)
                answer = client.send("tasks/result", {"taskId": task.task_id})
                with self.lock:
                    self.counts.held[held_kind(answer, task)] += 1
                    if held_kind(answer, task) == "other":
                        self.counts.problems.append(f"held tasks/result answered {answer}")
        except httpx.HTTPError as exc:
            self.note(f"holder: {exc!r}")
        finally:
            client.close()

    def note(self, problem: str) -> None:
        with self.lock:
            self.counts.wrong += 1
            self.counts.problems.append(problem)

    @contextmanager
    def running(self, per_face: int = 1) -> Iterator[None]:
        threads = [
            threading.Thread(target=self.creator, args=(s, f, n), daemon=True)
            for s in range(len(self.urls))
            for f in (CORE, EXT)
            for n in range(per_face)
        ]
        threads += [
            threading.Thread(target=self.holder, args=(s,), daemon=True)
            for s in range(len(self.urls))
        ]
        for t in threads:
            t.start()
        try:
            yield
        finally:
            self.stop.set()
            for t in threads:
                t.join(timeout=180)


def held_kind(answer: dict[str, Any], task: Task) -> str:
    result = answer.get("result")
    if isinstance(result, dict) and (result.get("content") or [{}])[0].get("text") == task.text:
        return "exact result"
    return "store unavailable" if is_unavailable(answer) else "other"


def check(urls: list[str], tasks: list[Task], counts: Counts, deadline_s: float = 120) -> None:
    """Poll every acknowledged task until terminal (or the deadline) and count it."""
    deadline = time.monotonic() + deadline_s
    cores = [CoreClient(u) for u in urls]
    exts = [ExtClient(u, 120, AUTH) for u in urls]
    try:
        for task in tasks:
            client = cores[task.server] if task.face == CORE else exts[task.server]
            while True:
                got = client.send("tasks/get", {"taskId": task.task_id})
                status = (got.get("result") or {}).get("status")
                if status in TERMINAL or "error" in got or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            classify(client, task, got, counts)
    finally:
        for c in cores:
            c.close()
        for e in exts:
            e.close()


def classify(
    client: CoreClient | ExtClient, task: Task, got: dict[str, Any], counts: Counts
) -> None:
    err = got.get("error")
    if isinstance(err, dict):
        if err.get("code") == -32602:
            counts.lost_with_the_store += 1
        else:
            counts.wrong += 1
            counts.problems.append(f"{task.task_id}: tasks/get answered {got}")
        return
    res = got["result"]
    if res["status"] not in TERMINAL:
        counts.stuck += 1
        counts.problems.append(f"{task.task_id}: still {res['status']}")
    elif res["status"] == "failed" and res.get("statusMessage"):
        counts.failed_with_reason += 1
        counts.reasons[res["statusMessage"]] += 1
    elif res["status"] == "completed":
        if task.face == CORE:
            result = client.send("tasks/result", {"taskId": task.task_id}).get("result") or {}
        else:
            result = res.get("result") or {}
        text = (result.get("content") or [{}])[0].get("text")
        if text == task.text:
            counts.completed_exactly += 1
        else:
            counts.wrong += 1
            counts.problems.append(f"{task.task_id}: result {text!r}, not {task.text!r}")
    else:
        counts.wrong += 1
        counts.problems.append(f"{task.task_id}: {res}")


def doors_of(run: str, front_door: str | None = None) -> tuple[str, ...]:
    """The front doors of a run's servers: a Redis run's two instances take one each (every
    Redis run goes through both doors), the SQLite run's one server ``front_door``."""
    if run.startswith("redis"):
        return FRONT_DOORS
    return (front_door or FRONT_DOORS[0],)


def one_run(run: str, workdir: Path, seconds: float = 8.0, front_door: str | None = None) -> Counts:
    """One run (see the module): the counts. ``front_door``: the SQLite run's door."""
    workdir.mkdir(parents=True, exist_ok=True)
    tokens = workdir / "tokens.json"
    tokens.write_text(json.dumps(TOKENS))
    counts = Counts(run)
    doors = doors_of(run, front_door)
    with ExitStack() as stack:
        blink: tuple[Callable[[], object], Callable[[], object]]
        if run == "sqlite-lock":
            db = workdir / "tasks.db"
            store = f"sqlite:{db}"
            lock = SqliteLock(db)
            stack.callback(lock.release)
            blink, hold_s = (lock.take_now, lock.release), 12.0
        else:
            redis = RedisServer(workdir / "redis", persist=run != "redis-volatile")
            stack.enter_context(running(redis))
            lease = 2 if run == "redis-long" else 10
            store = f"redis://127.0.0.1:{redis.port}/0?namespace=outage&lease={lease}"
            blink, hold_s = (redis.stop, redis.start), 5.0
        servers = [
            stack.enter_context(running(example_server(store, tokens, workdir, door)))
            for door in doors
        ]
        urls = [s.url for s in servers]
        load = Load(urls, counts)
        with load.running():
            time.sleep(min(1.5, seconds / 4))  # the load's own pacing: tasks run when it blinks
            blink[0]()
            time.sleep(hold_s)  # the blink's length is what the run is about
            blink[1]()
            time.sleep(max(0.0, seconds - hold_s - 1.5))
        check(urls, load.tasks, counts)
    counts.kept = sum(
        log.read_text(errors="replace").count("it is kept and written again")
        for log in workdir.glob("server-*.log")
    )
    return counts


def main(argv: list[str] | None = None) -> int:
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="*", choices=[*RUNS, []], help="default: all")
    parser.add_argument("--seconds", type=float, default=8.0, help="load per run")
    parser.add_argument(
        "--front-door", choices=FRONT_DOORS, default=FRONT_DOORS[0], help="the SQLite run's"
    )
    opts = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        for run in opts.runs or RUNS:
            counts = one_run(run, Path(tmp) / run, opts.seconds, opts.front_door)
            print(counts.line(), flush=True)
            for problem in counts.problems[:10]:
                print(f"  {problem}")
            for reason, n in counts.reasons.items():
                print(f"  failed {n}: {reason}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
