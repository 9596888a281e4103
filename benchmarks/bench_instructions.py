"""Instructions per operation of the example server, before and after: a figure this shared
machine's noise does not move.

    .venv/bin/python benchmarks/bench_instructions.py --before CHECKOUT   # about 5 minutes
    .venv/bin/python benchmarks/bench_instructions.py --before CHECKOUT --quick

One window of the same server ranges over ±15% on a shared 2-core VM, so tasks/s cannot
tell 3% from nothing; the instructions a request costs can. Each side (this checkout's
``generated/``, and ``--before``'s) serves the example server as shipped (the command line of
``peers_bench.py``'s ``ours-memory`` and ``ours-ext`` rows) under valgrind's callgrind, with
instrumentation off until the measured requests. ``--clients`` clients (default: the peers
benchmark's 8 sessions, so requests queue on a busy server as they do there; ``--clients 1``
measures the quiet path, one request at a time) then, over HTTP:

- warm the path up (``--warmup`` operations each: imports, caches, the first GC generations);
- have callgrind count from zero, make ``--ops`` operations between them, each client one
  after another, and have it dump;
- the dump's total ``Ir`` (instructions executed, in every thread of the server: uvicorn,
  the SDK, our runtime, the tool, the event loop's idle turns) ÷ operations.

Workloads (the peers benchmark's): ``lifecycle`` (a task ``tools/call`` of
``slow_compute(0)`` then ``tasks/result``, 2025-11-25 on a session), ``poll`` (``tasks/get`` of
a completed task), ``ext_lifecycle`` (the extension's task ``tools/call`` then ``tasks/get``
until terminal, stateless) and ``ext_poll``. Kernel time is not in ``Ir``: the syscalls per
operation are reported beside it from ``strace -c -f`` over the same kind of run.

Needs ``valgrind`` (and ``strace`` for the syscall column; absent: "–"). ``PYTHONHASHSEED``
is fixed so both sides hash alike. Writes ``benchmarks/results/instructions-latest.{json,md}``
(``--out`` elsewhere).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE / "peers"))
sys.path.insert(0, str(ROOT / "tests"))  # testkit, which servers.py imports

from driver import TERMINAL, Session, Stateless  # noqa: E402
from localhost import HOST, free_port, redis_argv, stop  # noqa: E402
from servers import OURS_FLAGS  # noqa: E402
from workloads import Plan  # noqa: E402

Op = Callable[[], Awaitable[Any]]
WORKLOADS = ("lifecycle", "poll", "ext_lifecycle", "ext_poll")
START_TIMEOUT_S = 180.0  # a Python server's start under callgrind takes tens of seconds
EXT_PAUSE_S = 0.02  # between two tasks/get of an extension lifecycle


#: ``--store``: the store the example server runs on, as ``--store`` takes it on (port, a
#: folder for files); None: the shipped default (memory). Set by ``main``.
STORE: Callable[[int], str] | None = None


def server_argv(port: int) -> list[str]:
    store = [] if STORE is None else ["--store", STORE(port)]
    return [sys.executable, "-m", "mcp_tasks.examples.server", "--http", f"{HOST}:{port}",
            *OURS_FLAGS, *store]  # fmt: skip


def env_for(generated: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(generated), "PYTHONHASHSEED": "0"}


async def wait_ready(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            _r, w = await asyncio.open_connection(HOST, port)
            w.close()
            return
        except OSError:
            await asyncio.sleep(0.2)
    raise RuntimeError(f"the example server did not start (exit {proc.poll()})")


async def operation(workload: str, port: int) -> tuple[Op, Callable[[], None]]:
    """One operation of ``workload`` against the server on ``port``, and its client's close."""
    if workload.startswith("ext_"):
        ext = await Stateless(HOST, port).open()

        async def ext_task() -> Any:
            created = await ext.task_call(0)
            return await ext.wait_terminal(created, EXT_PAUSE_S)

        if workload == "ext_lifecycle":
            return ext_task, ext.close
        created = await ext.task_call(0.01)
        done = await ext.wait_terminal(created, 0.005)
        assert done["status"] in TERMINAL, done
        params = {"taskId": created["taskId"]}
        return (lambda: ext.call("tasks/get", params)), ext.close
    s = await Session(HOST, port).open()

    async def core_task() -> Any:
        task = await s.task_call(0)
        return await s.call("tasks/result", {"taskId": task["taskId"]})

    if workload == "lifecycle":
        return core_task, s.close
    task = await s.task_call(0)
    await s.call("tasks/result", {"taskId": task["taskId"]})
    got = {"taskId": task["taskId"]}
    return (lambda: s.call("tasks/get", got)), s.close


def control(pid: int, *args: str) -> None:
    subprocess.run(["callgrind_control", *args, str(pid)], check=True, capture_output=True)


def newest_total_ir(out_dir: Path) -> int:
    """The ``Ir`` total of the newest dump callgrind wrote in ``out_dir``."""
    dumps = sorted(out_dir.glob("cg.out*"), key=lambda p: p.stat().st_mtime)
    if dumps:
        found = re.search(r"^(?:totals|summary):\s+(\d+)", dumps[-1].read_text(errors="replace"), re.M)
        if found:
            return int(found.group(1))
    raise RuntimeError(f"no callgrind dump with a total in {out_dir}")


Run = Callable[[int], Awaitable[None]]


@contextlib.asynccontextmanager
async def warmed(
    generated: Path, workload: str, warmup: int, clients: int, wrapper: list[str]
) -> AsyncIterator[tuple[int, Run]]:
    """The example server from ``generated`` (under ``wrapper``, e.g. valgrind) with
    ``clients`` clients past ``warmup`` operations each: (the server's pid, ``run(n)``, which
    makes ``n`` operations shared among the clients, each client's one after another)."""
    port = free_port()
    proc = subprocess.Popen([*wrapper, *server_argv(port)], env=env_for(generated), cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    opened: list[tuple[Op, Callable[[], None]]] = []
    try:
        await wait_ready(port, proc)
        for _ in range(clients):
            opened.append(await operation(workload, port))

        async def run(n: int) -> None:
            async def one(op: Op, k: int) -> None:
                for _ in range(k):
                    await op()

            share, extra = divmod(n, len(opened))
            await asyncio.gather(
                *(one(op, share + (i < extra)) for i, (op, _c) in enumerate(opened))
            )

        await run(warmup * clients)
        yield proc.pid, run
    finally:
        for _op, close in opened:
            close()
        stop(proc, grace_s=30)


async def instructions(
    generated: Path, workload: str, ops: int, args: argparse.Namespace, tmp: Path
) -> float:
    """Instructions per operation of ``workload`` on the server from ``generated``."""
    out_dir = Path(tempfile.mkdtemp(dir=tmp))
    valgrind = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--trace-children=no",
                f"--callgrind-out-file={out_dir}/cg.out.%p"]  # fmt: skip
    async with warmed(generated, workload, args.warmup, args.clients, valgrind) as (pid, run):
        control(pid, "--instr=on")
        control(pid, "--zero")
        await run(ops)
        control(pid, "--dump")
        return newest_total_ir(out_dir) / ops


async def syscalls(
    generated: Path, workload: str, ops: int, args: argparse.Namespace
) -> float | None:
    """System calls per operation (``strace -c -f`` attached over the measured operations)."""
    if shutil.which("strace") is None:
        return None
    async with warmed(generated, workload, args.warmup, args.clients, []) as (pid, run):
        tracer = subprocess.Popen(["strace", "-c", "-f", "-p", str(pid)], text=True,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
        try:
            await asyncio.sleep(1.0)  # attached to every thread
            await run(ops)
            tracer.send_signal(signal.SIGINT)
            _out, err = tracer.communicate(timeout=30)
        finally:
            if tracer.poll() is None:
                tracer.kill()
        return strace_calls(err) / ops


def strace_calls(summary: str) -> int:
    """The call count of ``strace -c``'s total line (``% time, seconds, usecs/call, calls,
    [errors,] total``)."""
    for line in reversed(summary.splitlines()):
        parts = line.split()
        if parts and parts[-1] == "total" and len(parts) >= 5:
            return int(parts[3])
    raise RuntimeError(f"no total in strace's summary: {summary[-500:]!r}")


class Failed(Exception):
    """A side could not be measured: its workload, side and checkout named."""


async def measure(args: argparse.Namespace, tmp: Path) -> list[dict[str, Any]]:
    # the before side first: a checkout that cannot serve fails before the after side is counted
    sides = {"before": args.before.resolve() / "generated", "after": ROOT / "generated"}
    rows = []
    for workload in args.workloads:
        ops = args.ops if "poll" in workload else max(1, args.ops // 4)
        row: dict[str, Any] = {"workload": workload, "ops": ops}
        for side, generated in sides.items():
            try:
                row[f"{side}_ir"] = await instructions(generated, workload, ops, args, tmp)
                row[f"{side}_syscalls"] = await syscalls(generated, workload, ops, args)
            except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
                raise Failed(f"{workload}, {side} ({generated}): {exc}") from exc
        row["ir_ratio"] = row["after_ir"] / row["before_ir"]
        print(
            f"{workload:13s} Ir/op before {row['before_ir']:,.0f} after {row['after_ir']:,.0f}"
            f" ({row['ir_ratio']:.3f}); syscalls/op {fmt(row['before_syscalls'])}"
            f" -> {fmt(row['after_syscalls'])}",
            flush=True,
        )
        rows.append(row)
    return rows


def fmt(v: float | None, digits: int = 1) -> str:
    return "–" if v is None else f"{v:,.{digits}f}"


def markdown(
    rows: list[dict[str, Any]], before: Path, when: str, clients: int, store: str = "memory"
) -> str:
    lines = [
        f"**Instructions per operation** (callgrind, {clients} client{'s' * (clients > 1)};"
        f" {store} store; {when}; before: `{before}`)",
        "",
        "| workload | ops | before Ir/op | after Ir/op | after ÷ before"
        " | syscalls/op before | after |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r['workload']} | {r['ops']} | {r['before_ir']:,.0f} | {r['after_ir']:,.0f}"
            f" | {r['ir_ratio']:.3f} | {fmt(r['before_syscalls'])} | {fmt(r['after_syscalls'])} |"
        )
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", type=Path, required=True, metavar="CHECKOUT",
                    help="a checkout (e.g. a git worktree) whose generated/ is the before side")
    ap.add_argument("--ops", type=int, default=400, help="tasks/get per poll row (lifecycles: 1/4)")
    ap.add_argument("--warmup", type=int, default=50, help="operations per client before counting")
    ap.add_argument("--clients", type=int, default=Plan().sessions,
                    help="clients at once (default: the peers benchmark's sessions)")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--store", choices=("memory", "sqlite", "redis"), default="memory",
                    help="the store both sides run on (sqlite: a new file per server; redis: a"
                    " throw-away redis-server, a namespace per server; its own instructions"
                    " are not counted). Past --warmup x --clients = 1,000 lifecycles each"
                    " creation drops the oldest finished task, as in the peer tables")
    ap.add_argument("--quick", action="store_true", help="a few operations (tests)")
    ap.add_argument("--out", type=Path, default=HERE / "results")
    args = ap.parse_args(argv)
    args.workloads = args.workloads.split(",")
    if unknown := set(args.workloads) - set(WORKLOADS):
        ap.error(f"--workloads: unknown {', '.join(sorted(unknown))} (one of {', '.join(WORKLOADS)})")
    if args.clients < 1:
        ap.error(f"--clients: {args.clients} (at least 1)")
    if args.quick:
        args.ops, args.warmup = 8, 4
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    server = args.before / "generated" / "mcp_tasks" / "examples" / "server.py"
    if not server.is_file():
        print(f"--before {args.before}: no generated/mcp_tasks/examples/server.py there",
              file=sys.stderr)  # fmt: skip
        return 2
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return 2
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    global STORE
    with tempfile.TemporaryDirectory(prefix="bench-ir-") as d, contextlib.ExitStack() as stack:
        if args.store == "sqlite":
            STORE = lambda port: f"sqlite:{d}/tasks-{port}.db"  # noqa: E731
        elif args.store == "redis":
            redis_port = free_port()
            redis = subprocess.Popen(redis_argv(redis_port), stdout=subprocess.DEVNULL)
            stack.callback(stop, redis)
            STORE = lambda port: f"redis://{HOST}:{redis_port}/0?namespace=ir-{port}"  # noqa: E731
        try:
            rows = asyncio.run(measure(args, Path(d)))
        except Failed as exc:  # the last results stay as they were
            print(f"bench_instructions: {exc}", file=sys.stderr)
            return 1
    args.out.mkdir(parents=True, exist_ok=True)
    report = {"date": when, "before": str(args.before), "ops": args.ops,
              "clients": args.clients, "store": args.store, "rows": rows}  # fmt: skip
    (args.out / "instructions-latest.json").write_text(json.dumps(report, indent=1))
    md = markdown(rows, args.before, when, args.clients, args.store)
    (args.out / "instructions-latest.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
