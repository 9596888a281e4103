"""The report of ``peers_bench.py``: medians over repetitions and ratios taken within each
(:func:`aggregate`), the targets and whether each is met (:func:`targets`), and the
markdown tables (:func:`markdown`) that ``peers-latest.md`` and benchmarks/README.md show.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Collection
from operator import itemgetter
from typing import Any

import scaleout
from paired import quartiles, ratios
from servers import (
    BEFORE,
    CEILING,
    CORE,
    EXT,
    FASTMCP,
    OURS_FLAGS,
    OURS_H11,
    OURS_MEMORY,
    TS,
    TS_PARSED,
    uvicorn_auto_stack,
)
from workloads import EXT_POLL_PAUSE_S, Plan


def med(values: list[float]) -> float | None:
    vals = [v for v in values if v is not None and v == v]
    return statistics.median(vals) if vals else None


#: Throughput workloads: (rate, server CPU per operation, other medians reported).
RATE_KEYS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "lifecycle": (
        "tasks_per_s",
        "server_cpu_ms_per_task",
        ("p50_ms", "p99_ms", "driver_cpu_us_per_req", "server_cpu_util"),
    ),
    "poll": ("gets_per_s", "server_cpu_us_per_get", ("driver_cpu_us_per_req",)),
}


def aggregate(runs: dict[str, dict[str, list[dict[str, Any]]]], names: list[str]) -> dict[str, Any]:
    """Medians over repetitions; ratios to ts computed per repetition, then the median."""
    agg: dict[str, Any] = {}

    def ratio(
        workload: str, name: str, getter: Callable[[dict[str, Any]], float], to: str = TS
    ) -> float | None:
        mine, theirs = runs[workload].get(name, []), runs[workload].get(to, [])
        pairs = zip(mine, theirs, strict=False)
        return med([getter(a) / getter(b) for a, b in pairs if "not_served" not in a and getter(b)])

    def cross(
        key: str,
        workload: str,
        name: str,
        getter: Callable[[dict[str, Any]], float],
        to: str = TS,
    ) -> float | None:
        mine, theirs = runs[key].get(name, []), runs[workload].get(to, [])
        pairs = zip(mine, theirs, strict=False)
        return med([getter(a) / getter(b) for a, b in pairs if "not_served" not in a and getter(b)])

    for name in names:
        row: dict[str, Any] = {}
        for workload, (rate, cpu, extra) in RATE_KEYS.items():
            for key, ref, floor in ((workload, TS, "floor"), (f"ext_{workload}", FASTMCP, None)):
                done = [r for r in runs[key][name] if "not_served" not in r]
                if runs[key][name] and not done:
                    row[f"{key}.not_served"] = runs[key][name][0]["not_served"]
                if not done:
                    continue
                for k in (rate, cpu, *extra, "gets_per_task"):
                    if all(k in r for r in done):
                        row[f"{key}.{k}"] = med([r[k] for r in done])
                row[f"{key}.x_{ref}"] = ratio(key, name, itemgetter(rate), ref)
                # both faces against the TypeScript server's 2025-11-25 figures, per repetition
                row[f"{key}.x_ts_face"] = cross(key, workload, name, itemgetter(rate))
                row[f"{key}.cpu_x_ts"] = cross(key, workload, name, itemgetter(cpu))
                # and against TypeScript on node:http with the body parsed by the app (its
                # cheapest set-up here: a labelled row, reported beside the reference)
                row[f"{key}.x_ts_parsed_face"] = cross(
                    key, workload, name, itemgetter(rate), TS_PARSED
                )
                # and against the ceiling's 2025-11-25 figures (it has no extension face)
                row[f"{key}.x_ceiling_face"] = cross(key, workload, name, itemgetter(rate), CEILING)
                row[f"{key}.x_memory"] = ratio(key, name, itemgetter(rate), OURS_MEMORY)
                if floor:
                    row[f"{key}.cpu_x_floor"] = ratio(key, name, itemgetter(cpu), floor)
                    row[f"{key}.x_{CEILING}"] = ratio(key, name, itemgetter(rate), CEILING)
        wk = runs["wakeup"][name]
        if wk:
            row["wakeup.p50_ms"] = med([r["p50_ms"] for r in wk])
            row["wakeup.p99_ms"] = med([r["p99_ms"] for r in wk])
            row["wakeup.x_ts"] = ratio("wakeup", name, lambda r: r["p99_ms"])
        ls = runs["list"][name]
        if ls:
            row["memory.bytes_per_task"] = med([r["bytes_per_task"] for r in ls])
            row["memory.x_ts"] = ratio("list", name, lambda r: r["bytes_per_task"])
            pre = [r["bytes_per_task_prefilled"] for r in ls if "bytes_per_task_prefilled" in r]
            row["memory.bytes_per_task_prefilled"] = med(pre)
            heap = [r["heap_bytes_per_task"] for r in ls if "heap_bytes_per_task" in r]
            row["memory.heap_bytes_per_task"] = med(heap)
            for n in ls[0]["points"]:
                for key in ("first_page_ms", "walk_ms", "page_size", "walk_tasks"):
                    row[f"list.{n}.{key}"] = med(
                        [r["points"][n][key] for r in ls if n in r["points"]]
                    )
        agg[name] = row
    return agg


def fmt(v: Any, digits: int = 1) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        if abs(v) >= 100:
            return f"{v:,.0f}"
        return f"{v:.{digits}f}"
    return str(v)


Check = tuple[str, str, Callable[[dict[str, Any]], Any], Callable[[Any], bool]]


def _checks(plan: Plan) -> list[Check]:
    """(servers it applies to, target, value getter, met?) -- the issue's targets; ratios are
    medians of per-repetition ratios (same run). ``servers``: "core" (ours on the 2025-11-25
    face), "shipped" (the example server's shipped default, memory store), "ext" (the
    extension face), "sqlite", "redis"."""
    first, last, big = (str(n) for n in (plan.list_sizes[0], plan.list_sizes[-1], plan.big_list))

    def flat(row: dict[str, Any]) -> float | None:
        small, large = row.get(f"list.{first}.first_page_ms"), row.get(f"list.{big}.first_page_ms")
        return None if small is None or large is None else large / small

    def get(key: str) -> Callable[[dict[str, Any]], Any]:
        return lambda r: r.get(key)

    at_least, at_most = (lambda x: lambda v: v >= x), (lambda x: lambda v: v <= x)
    return [
        ("shipped", "lifecycle ≥ 2.0 × TS (8 sessions)", get("lifecycle.x_ts"), at_least(2.0)),
        ("shipped", "lifecycle server CPU/task ≤ 0.5 × TS", get("lifecycle.cpu_x_ts"), at_most(0.5)),
        ("shipped", "tasks/get ≥ 2.5 × TS (8 sessions)", get("poll.x_ts"), at_least(2.5)),
        ("shipped", "tasks/get server CPU ≤ 0.5 × TS", get("poll.cpu_x_ts"), at_most(0.5)),
        ("shipped", "lifecycle × TS on node:http, app-parsed body (reported)", get("lifecycle.x_ts_parsed_face"), lambda v: True),
        ("shipped", "tasks/get × TS on node:http, app-parsed body (reported)", get("poll.x_ts_parsed_face"), lambda v: True),
        ("shipped", "lifecycle × ceiling (reported)", get("lifecycle.x_ceiling"), lambda v: True),
        ("shipped", "tasks/get × ceiling (reported)", get("poll.x_ceiling"), lambda v: True),
        ("ext", "lifecycle ≥ 2.0 × TS's 2025-11-25 lifecycle", get("ext_lifecycle.x_ts_face"), at_least(2.0)),
        ("ext", "lifecycle server CPU/task ≤ 0.5 × TS", get("ext_lifecycle.cpu_x_ts"), at_most(0.5)),
        ("ext", "lifecycle × TS on node:http, app-parsed body (reported)", get("ext_lifecycle.x_ts_parsed_face"), lambda v: True),
        ("ext", "tasks/get ≥ 2.0 × TS's 2025-11-25 tasks/get", get("ext_poll.x_ts_face"), at_least(2.0)),
        ("ext", "tasks/get server CPU ≤ 0.5 × TS", get("ext_poll.cpu_x_ts"), at_most(0.5)),
        ("core", "wake-up p99 < 5 ms", get("wakeup.p99_ms"), lambda v: v < 5),
        ("core", f"list first page < 2 ms at {int(last):,} (ms)", get(f"list.{last}.first_page_ms"), lambda v: v < 2),
        ("sqlite redis", f"list first page flat {int(first):,} → {int(big):,} (ratio ≤ 1.5)", flat, at_most(1.5)),
        ("shipped", "memory < 1.5 KB RSS per retained task (bytes)", get("memory.bytes_per_task"), lambda v: v < 1536),
        ("sqlite", "lifecycle ≥ 0.6 × the memory store's", get("lifecycle.x_memory"), at_least(0.6)),
        ("redis", "lifecycle ≥ 0.5 × the memory store's", get("lifecycle.x_memory"), at_least(0.5)),
    ]  # fmt: skip


def _kind(name: str, ext: Collection[str]) -> str:
    if name in ext:
        return "ext"
    return {OURS_MEMORY: "shipped", "ours-sqlite": "sqlite", "ours-redis": "redis"}.get(name, "")


def targets(agg: dict[str, Any], plan: Plan, ext: Collection[str] = ()) -> list[dict[str, Any]]:
    """The issue's targets for each of our servers, the floor server's figure beside (a
    target the floor misses too is out of reach on the SDK's transport here)."""
    out: list[dict[str, Any]] = []
    floor = agg.get("floor", {})
    for name in [n for n in agg if n.startswith("ours-") and n != OURS_H11 and BEFORE not in n]:
        kind = _kind(name, ext)
        for applies, what, get, ok in _checks(plan):
            if kind not in applies.split() and not (applies == "core" and kind != "ext"):
                continue
            value = get(agg[name])
            met = None if value is None else bool(ok(value))
            fvalue = get(floor) if floor and kind != "ext" and "memory store" not in what else None
            note = ""
            if "reported" in what:
                met = None
            elif met is False and fvalue is not None and not ok(fvalue):
                note = "the floor misses it too"
            elif value is None and what.startswith("list first page flat"):
                note = f"no {int(plan.big_list):,}-task row"
            out.append(
                {"server": name, "target": what, "value": value, "met": met, "floor": fvalue,
                 "floor_met": None if fvalue is None else bool(ok(fvalue)), "note": note}
            )  # fmt: skip
    return out


def scale_targets(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Two workers on one Redis: at least 1.4 × one's lifecycle rate on this machine, or
    the server CPU per task (workers and Redis) within 10 % of one's (the driver, Redis and
    both workers share the cores: what scales is what a task costs)."""
    one = next((r for r in rows if r["workers"] == 1), None)
    two = next((r for r in rows if r["workers"] == 2), None)
    if one is None or two is None:
        return []
    value = two.get("x_1_worker")
    cpu = two["server_cpu_ms_per_task"] / one["server_cpu_ms_per_task"]
    met = None if value is None else value >= 1.4 or cpu <= 1.10
    return [
        {"server": "ours-redis ×2 workers",
         "target": "two workers ≥ 1.4 × one (lifecycle), or server CPU/task ≤ 1.10 × one's",
         "value": value, "met": met, "floor": None, "floor_met": None,
         "note": f"server CPU/task × one's: {cpu:.2f}"}
    ]  # fmt: skip


Lines = list[str]

#: The columns of the tables whose columns do not depend on the plan, as their header rows.
LIFECYCLE_COLUMNS = (
    "server | tasks/s | × TS | × ceiling | p50 ms | p99 ms | server CPU ms/task | CPU × floor"
    " | server CPU use | driver CPU µs/req"
).split(" | ")
WAKEUP_POLL_COLUMNS = (
    "server | wake p50 ms | wake p99 ms | gets/s | × TS | × ceiling | server CPU µs/get"
    " | CPU × floor | driver CPU µs/req"
).split(" | ")
TARGETS_COLUMNS = "server | target | ours | met | floor | note".split(" | ")
EXT_COLUMNS = (
    "server | tasks/s | × FastMCP | × TS | × ceiling | p50 ms | p99 ms | gets/task"
    " | server CPU ms/task | gets/s | × FastMCP | × TS | × ceiling | server CPU µs/get"
).split(" | ")


def markdown(report: dict[str, Any]) -> str:
    """The tables of a report (``peers-latest.md``, and benchmarks/README.md's)."""
    agg, specs = report["aggregate"], report["servers"]
    names = [s["name"] for s in specs if s["name"] in agg and s.get("face", CORE) == CORE]
    label = {s["name"]: s["label"] for s in specs}
    lines = _intro(report)
    lines += _lifecycle_table(report, names, label)
    lines += _wakeup_poll_table(report, names, label)
    lines += _list_memory_tables(report, names, label)
    lines += ext_markdown(report)
    lines += _stores_table(report)
    lines += _scaleout_table(report)
    lines += _before_table(report)
    lines += _targets_table(report)
    skipped = [f"{s['name']} ({s['missing']})" for s in specs if s.get("missing")]
    if skipped:
        lines += ["", "Not run: " + "; ".join(skipped) + "."]
    if report["errors"]:
        lines += ["", "Errors: " + "; ".join(report["errors"])]
    return "\n".join(lines) + "\n"


def _intro(report: dict[str, Any]) -> Lines:
    """The machine, the load, and what "ours" is."""
    plan, m = report["plan"], report["machine"]
    load = m["loadavg_before"]
    return [
        f"Run {report['date']} on {m['cpu']} ({m['cores']} cores, Linux {m['kernel']}), "
        f"Python {m['python']}, Node {m['node']}; {plan['reps']} repetitions, medians; "
        f"load average before the run {load[0]:.1f} / after {report['loadavg_after'][0]:.1f}"
        + (
            " — **taken while other jobs shared the machine**: absolute figures are pessimistic, "
            "ratios taken within each repetition are the fairer comparison."
            if load[0] > 0.5 * (m["cores"] or 1)
            else "."
        ),
        "",
        "Ours is the example server as users run it (`python -m mcp_tasks.examples.server "
        "--http HOST:PORT [--store ...]`) with its shipped defaults, SSE responses and "
        f"`--http-stack auto` ({uvicorn_auto_stack()} here) included, "
        f"and `{' '.join(report.get('ours_flags', OURS_FLAGS))}` (the default rate limit, "
        "1,000 task requests per requestor per 10 s, would cap polling at 100 gets/s per "
        "session; `--max-active` is left at its default).",
        "",
        "× TS is against the TypeScript SDK as its own examples run it: an express app from "
        "`createMcpExpressApp()`, whose `express.json()` parses the body that the route hands "
        "to `transport.handleRequest(req, res, req.body)`, on its default SSE responses (row "
        "`ts`); the rows with `enableJsonResponse` and with the raw request (the SDK reading "
        "and parsing the body itself, the setup of earlier figures) are labelled and never a "
        "reference. × ceiling is against the raw-ASGI ceiling in the same repetition.",
    ]


def _table(title: str, columns: list[str], rows: list[list[str]], align: str = "") -> Lines:
    """A markdown table under ``title``: its first column left-aligned, the others right-
    aligned (or as ``align``, one ``---:``-style marker a column, says)."""
    marks = align.split() or ["---", *["---:"] * (len(columns) - 1)]
    return [
        "",
        title,
        "",
        "| " + " | ".join(columns) + " |",
        "| " + " | ".join(marks) + " |",
        *("| " + " | ".join(cells) + " |" for cells in rows),
    ]


def _lifecycle_table(report: dict[str, Any], names: list[str], label: dict[str, str]) -> Lines:
    agg, plan = report["aggregate"], report["plan"]
    title = (
        f"**Lifecycle** ({plan['sessions']} sessions looping task-augmented `slow_compute(0)` → `tasks/result`, "
        f"{plan['window_s']:g} s window; CPU from `/proc/PID/stat`)"
    )
    rows = []
    for n in names:
        r = agg[n]
        util = r.get("lifecycle.server_cpu_util")
        rows.append(
            [label[n], fmt(r.get("lifecycle.tasks_per_s")), fmt(r.get("lifecycle.x_ts"), 2),
             fmt(r.get("lifecycle.x_ceiling"), 2),
             fmt(r.get("lifecycle.p50_ms"), 2), fmt(r.get("lifecycle.p99_ms"), 2),
             fmt(r.get("lifecycle.server_cpu_ms_per_task"), 3),
             fmt(r.get("lifecycle.cpu_x_floor"), 2), "–" if util is None else f"{util:.0%}",
             fmt(r.get("lifecycle.driver_cpu_us_per_req"))]
        )  # fmt: skip
    return _table(title, LIFECYCLE_COLUMNS, rows)


def _wakeup_poll_table(report: dict[str, Any], names: list[str], label: dict[str, str]) -> Lines:
    agg, plan = report["aggregate"], report["plan"]
    title = (
        f"**Wake-up** (`slow_compute({plan['wake_seconds']:g})` then `tasks/result` at once; lateness = answer − "
        f"(call sent + {plan['wake_seconds']:g} s); {plan['sessions']} staggered sessions × {plan['wake_rounds']} rounds) "
        f"and **poll** ({plan['sessions']} sessions looping `tasks/get`)"
    )
    rows = [
        [label[n], fmt(r.get("wakeup.p50_ms"), 2), fmt(r.get("wakeup.p99_ms"), 2),
         fmt(r.get("poll.gets_per_s")), fmt(r.get("poll.x_ts"), 2),
         fmt(r.get("poll.x_ceiling"), 2),
         fmt(r.get("poll.server_cpu_us_per_get")), fmt(r.get("poll.cpu_x_floor"), 2),
         fmt(r.get("poll.driver_cpu_us_per_req"))]
        for n, r in ((n, agg[n]) for n in names)
    ]  # fmt: skip
    return _table(title, WAKEUP_POLL_COLUMNS, rows)


def _list_memory_tables(report: dict[str, Any], names: list[str], label: dict[str, str]) -> Lines:
    """The list pages against retained tasks, and the memory they take."""
    agg, plan = report["aggregate"], report["plan"]
    sizes = [str(n) for n in plan["list_sizes"]] + [str(plan["big_list"])]
    title = (
        f"**List** ({plan['list_reps']} repetitions; retained completed tasks in one session, "
        f"ms; the others are created over the wire; the {int(sizes[-1]):,} tasks are written "
        "into the SQLite file or Redis database our server runs on, through a second instance "
        "of the package's store (as another server instance sharing it would), in the first "
        "repetition only; the in-memory store cannot be reached from outside its server and "
        "filling it over the wire would take minutes, so it has no such row)"
    )
    columns = ["server", "page size", *(f"first page @{int(n):,}" for n in sizes)]
    columns += [f"walk @{int(n):,}" for n in sizes]
    listed = [n for n in names if f"list.{sizes[0]}.first_page_ms" in agg[n]]
    rows = [
        [label[n], fmt(agg[n].get(f"list.{sizes[0]}.page_size")),
         *(fmt(agg[n].get(f"list.{s}.first_page_ms"), 2) for s in sizes),
         *(fmt(agg[n].get(f"list.{s}.walk_ms"), 1) for s in sizes)]
        for n in listed
    ]  # fmt: skip
    lines = _table(title, columns, rows)
    title = (
        f"**Memory** ({plan['list_reps']} repetitions; server RSS growth per retained completed task; "
        "Redis rows include "
        "redis-server's RSS; the TypeScript server's RSS is read after a full GC, and its V8 "
        "heap growth is shown too)"
    )
    columns = ["server", f"RSS bytes/task {int(sizes[0]):,} → {int(sizes[-2]):,}", "× TS"]
    columns += [f"RSS bytes/task {int(sizes[-2]):,} → {int(sizes[-1]):,} (inserted)"]
    columns += ["heap bytes/task"]
    rows = [
        [label[n], fmt(r.get("memory.bytes_per_task")), fmt(r.get("memory.x_ts"), 2),
         fmt(r.get("memory.bytes_per_task_prefilled")),
         fmt(r.get("memory.heap_bytes_per_task"))]
        for n, r in ((n, agg[n]) for n in listed)
    ]  # fmt: skip
    return lines + _table(title, columns, rows)


def _scaleout_table(report: dict[str, Any]) -> Lines:
    if not report.get("scaleout"):
        return []
    return [
        "",
        "**Scale-out** (the example server on one Redis with `--workers N --stateless "
        "--tokens FILE`, 8 bearer-token clients looping task-augmented `slow_compute(0)` → "
        "`tasks/get` until terminal → `tasks/result`; driver, Redis and workers share this "
        "machine's cores)",
        "",
        scaleout.markdown(report["scaleout"]),
    ]


STORES_COLUMNS = (
    "server | tasks/s | × memory | server CPU ms/task | wake p99 ms | gets/s"
    " | round trips/task | sent/task | Redis ran/task | round trips/get | sent/get | Redis ran/get"
).split(" | ")


def _stores_table(report: dict[str, Any]) -> Lines:
    """The durable stores beside the memory store: the timed figures, and what a lifecycle
    and a ``tasks/get`` cost the store (``workloads.w_counts``): round trips are Redis
    pipelines (a lone command is one) or SQLite commits; sent are the commands in them
    or the statements run; Redis ran counts the commands inside scripts too."""
    agg, counts = report["aggregate"], report.get("counts") or {}
    names = [n for n in (OURS_MEMORY, "ours-sqlite", "ours-redis") if n in agg]
    names += [n for n in counts if n.endswith(BEFORE)]
    if not counts:
        return []
    rows = []
    for n in names:
        r, c = agg.get(n, {}), counts.get(n, {})
        cells = [n, fmt(r.get("lifecycle.tasks_per_s")), fmt(r.get("lifecycle.x_memory"), 2),
                 fmt(r.get("lifecycle.server_cpu_ms_per_task"), 3), fmt(r.get("wakeup.p99_ms"), 2),
                 fmt(r.get("poll.gets_per_s"))]  # fmt: skip
        for what in ("lifecycle", "get"):
            got = c.get(what)
            if got is None:
                cells += ["–", "–", "–"] if n != OURS_MEMORY else ["0", "0", "–"]
            elif "redis_ran" in got:
                cells += [
                    fmt(got["pipelines"], 2),
                    fmt(got["commands"], 2),
                    fmt(got["redis_ran"], 1),
                ]
            else:
                cells += [fmt(got["commits"], 2), fmt(got["statements"], 2), "–"]
        rows.append(cells)
    title = (
        "**Stores** (the lifecycle, wake-up and poll figures of the tables above beside what "
        "one lifecycle and one `tasks/get` cost the store, counted on a server of its own "
        "(`benchmarks/peers/counted.py`), one session, one request at a time: the lifecycle "
        "past the 1,000 finished tasks kept per client address (each creation drops the "
        "oldest, as in the timed windows), `tasks/get` on a task that ended over a second "
        "before. Round trips: Redis pipelines (a lone command is one) or SQLite commits; "
        "sent: the commands in them, or the SQL statements run; Redis ran: `INFO "
        "commandstats`, the commands run inside scripts too. `@before` rows: "
        f"`--before {report.get('before')}`, counted alike; their timed figures are in "
        '"Before and after")'
    )
    return _table(title, STORES_COLUMNS, rows)


BEFORE_COLUMNS = (
    "server | workload | pairs | before | after | after ÷ before | quartiles | CPU after ÷ before"
).split(" | ")


def _before_table(report: dict[str, Any]) -> Lines:
    """Our shipped rows against the same server from ``--before``'s checkout, measured in
    pairs of alternating windows (``paired.py``): the median of the ratios taken within
    each pair, their quartiles, and the median of the CPU ratios."""
    rows = []
    for key, by_name in (report.get("paired") or {}).items():
        rate, cpu, _extra = RATE_KEYS[key.removeprefix("ext_")]
        for name in [n for n in by_name if n + BEFORE in by_name]:
            mine, old = by_name[name], by_name[name + BEFORE]
            q = quartiles(ratios(mine, old, rate))
            cpus = ratios(mine, old, cpu)
            if q is None or not cpus:
                continue
            rows.append(
                [name, key, str(len(mine)), fmt(med([r[rate] for r in old])),
                 fmt(med([r[rate] for r in mine])), fmt(q[1], 3), f"{q[0]:.3f}-{q[2]:.3f}",
                 fmt(med(cpus), 3)]
            )  # fmt: skip
    if not rows:
        return []
    title = (
        f"**Before and after** (`--before {report.get('before')}`: the same rows served from "
        "that checkout's `generated/`, both processes up at once and measured in alternating "
        f"{report['plan'].get('pair_window_s')} s windows; rates are tasks/s and gets/s)"
    )
    return _table(title, BEFORE_COLUMNS, rows)


def _targets_table(report: dict[str, Any]) -> Lines:
    title = "**Targets** for our server, the floor server's figure beside"
    rows = [
        [t["server"], t["target"], fmt(t["value"], 2),
         {True: "yes", False: "**no**", None: "–"}[t["met"]], fmt(t["floor"], 2), t["note"]]
        for t in report["targets"]
    ]  # fmt: skip
    return _table(title, TARGETS_COLUMNS, rows, "--- --- ---: :---: ---: ---")


def ext_markdown(report: dict[str, Any]) -> list[str]:
    """The table of the 2026-07-28 tasks extension face ("–" where a server does not serve it)."""
    agg, plan, specs = report["aggregate"], report["plan"], report["servers"]
    ext = [s for s in specs if s.get("face") == EXT and s["name"] in agg]
    if not ext:
        return []
    title = (
        f"**Extension face** (2026-07-28 tasks extension, stateless: {plan['sessions']} clients looping "
        f"`slow_compute(0)` as a task → `tasks/get` every {EXT_POLL_PAUSE_S * 1e3:g} ms until terminal, "
        f"and looping `tasks/get` on a completed task; ratios per repetition to FastMCP 4, and to "
        f"the TypeScript server's and the ceiling's 2025-11-25 lifecycle and `tasks/get`: "
        f"neither has this face)"
    )
    rows = []
    for s in ext:
        r = agg[s["name"]]
        why = r.get("ext_lifecycle.not_served") or r.get("ext_poll.not_served")
        label = s["label"] + (f" (not served yet: {why})" if why else "")
        rows.append(
            [label, fmt(r.get("ext_lifecycle.tasks_per_s")),
             fmt(r.get("ext_lifecycle.x_fastmcp"), 2), fmt(r.get("ext_lifecycle.x_ts_face"), 2),
             fmt(r.get("ext_lifecycle.x_ceiling_face"), 2), fmt(r.get("ext_lifecycle.p50_ms"), 2),
             fmt(r.get("ext_lifecycle.p99_ms"), 2), fmt(r.get("ext_lifecycle.gets_per_task")),
             fmt(r.get("ext_lifecycle.server_cpu_ms_per_task"), 3),
             fmt(r.get("ext_poll.gets_per_s")), fmt(r.get("ext_poll.x_fastmcp"), 2),
             fmt(r.get("ext_poll.x_ts_face"), 2), fmt(r.get("ext_poll.x_ceiling_face"), 2),
             fmt(r.get("ext_poll.server_cpu_us_per_get"))]
        )  # fmt: skip
    return _table(title, EXT_COLUMNS, rows)
