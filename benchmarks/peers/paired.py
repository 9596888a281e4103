"""Before and after, paired: our server from this checkout and from ``--before``'s, measured
in alternating windows on the same two processes.

The peer tables run each workload on a fresh process per repetition, in rotating order: the
windows of two servers lie 5 to 20 seconds apart, and one window of the same server ranges
over ±15% on a shared 2-core VM, so ten repetitions do not resolve a 5% difference. To
compare two builds of one server, the noise must hit both alike: both servers are started
once per workload (the same shipped command line, the same store), then measured in
``plan.pairs`` pairs of short windows, back to back, the order within each pair alternating
(after, before; before, after; ...) so neither side always runs second. The ratio is taken
within each pair and the table shows their median and quartiles (the spread says how much
the run can resolve). Each window runs the workload as the rest of the benchmark does
(``plan.sessions`` clients opened for it, a warm-up, then the measured window); only the
window is shorter and the process lives across windows, as a user's server does.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from driver import RUN_FAILURES
from servers import BEFORE, Running, ServerSpec
from workloads import Plan, workloads_of

Runs = dict[str, dict[str, list[dict[str, Any]]]]


def pairs_of(specs: list[ServerSpec]) -> list[tuple[ServerSpec, ServerSpec]]:
    """(after, before) for each of our rows that ``before_specs`` served again."""
    by_name = {s.name: s for s in specs}
    return [
        (by_name[s.name.removesuffix(BEFORE)], s)
        for s in specs
        if s.name.endswith(BEFORE) and s.name.removesuffix(BEFORE) in by_name
    ]


async def run_paired(
    pairs: list[tuple[ServerSpec, ServerSpec]],
    plan: Plan,
    tmp: Path,
    errors: list[str],
    log: Callable[[str], None] = print,
) -> Runs:
    """Each workload of each pair in ``plan.pairs`` alternating pairs of windows: the
    results by workload and server name, in pair order (the i-th of each side is a pair)."""
    runs: Runs = {}
    window = replace(plan, warmup_s=plan.pair_warmup_s, window_s=plan.pair_window_s)
    for after, before in pairs:
        for workload in before.workloads or ():
            try:
                await _one_workload(after, before, workload, window, plan.pairs, tmp, runs, log)
            except RUN_FAILURES as exc:
                errors.append(f"paired {workload} {after.name} and {before.name}: {exc}")
                log(f"  ERROR {errors[-1]}")
    return runs


async def _one_workload(
    after: ServerSpec,
    before: ServerSpec,
    workload: str,
    window: Plan,
    n: int,
    tmp: Path,
    runs: Runs,
    log: Callable[[str], None],
) -> None:
    servers = {after.name: await Running(after, tmp).start()}
    try:
        servers[before.name] = await Running(before, tmp).start()
        got: dict[str, list[dict[str, Any]]] = {name: [] for name in servers}
        for i in range(n):
            order = (after, before) if i % 2 == 0 else (before, after)
            for spec in order:
                got[spec.name].append(await workloads_of(spec)[workload](servers[spec.name], window))
        # both lists complete before either enters the runs: the pairs stay aligned
        runs.setdefault(workload, {}).update(got)
        log(f"paired {workload:13s} {after.name}: {summary(workload, got[after.name], got[before.name])}")
    finally:
        for srv in servers.values():
            srv.stop()


def rate_key(workload: str) -> str:
    return "tasks_per_s" if workload.endswith("lifecycle") else "gets_per_s"


def ratios(mine: list[dict[str, Any]], theirs: list[dict[str, Any]], key: str) -> list[float]:
    """after ÷ before of ``key`` within each pair."""
    return [a[key] / b[key] for a, b in zip(mine, theirs, strict=False) if a.get(key) and b.get(key)]


def quartiles(values: list[float]) -> tuple[float, float, float] | None:
    """(first quartile, median, third quartile); None for fewer than two values."""
    if len(values) < 2:
        return None
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q2, q3


def summary(workload: str, mine: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> str:
    q = quartiles(ratios(mine, theirs, rate_key(workload)))
    if q is None:
        return "no pairs"
    return f"{len(mine)} pairs, after ÷ before median {q[1]:.3f} (quartiles {q[0]:.3f}-{q[2]:.3f})"
