"""Mutation run over the modules that hold the rules: does a test fail when the code is wrong?

One small change at a time (a *mutant*) is made to a module of the generated package (the
copy the tests import; its source of truth is ``templates/vendored/...``) or to the
generator's IR, and the tests that concern that module run against it. A mutant is *killed*
when they fail (or run past the timeout), *survived* when they pass: a survivor is code no
test checks, or a change that makes no difference (an *equivalent* mutant, listed in
:data:`EQUIVALENT` with the reason, and left out of the score).

Mutations (AST-level for Python, token-level for the Redis store's Lua scripts):

- comparisons flipped: ``<``/``<=``, ``>``/``>=``, ``==``/``!=``, ``in``/``not in``,
  ``is``/``is not`` (Lua: ``<``/``<=``, ``>``/``>=``, ``==``/``~=``);
- integer constants off by one (``n+1``, ``n-1``);
- ``x += y`` / ``x -= y`` -> ``x = y``; ``+`` <-> ``-``;
- ``and`` <-> ``or``; ``not x`` -> ``x``; ``True`` <-> ``False``;
- a statement dropped: a call or ``await`` statement or a ``raise`` -> ``pass`` (Lua: a
  ``redis.call`` statement); ``return X`` -> ``return None``.

Left alone: docstrings, annotations, ``assert`` statements, f-strings, ``__all__`` and
calls to a logger (``log.warning(...)``: what is logged is not a rule).

The module is changed in place and restored after each mutant, whatever happens (``finally``,
SIGTERM/SIGINT, and a backup the next run restores if this one was killed); its cached
bytecode is removed each time. Do not run tests in the same checkout meanwhile.

    python mutation/run.py                       # every module, at most --cap mutants each
    python mutation/run.py --module router       # modules whose path contains "router"
    python mutation/run.py --since HEAD          # only lines changed since a git revision
    python mutation/run.py --list                # the mutants, without running anything

The report (stdout, and ``--json FILE``) gives per module the mutants killed, survived,
timed out and excluded as equivalent, the kill rate, the time, and each survivor as
``template-path:line: mutation``.
"""

from __future__ import annotations

import argparse
import fcntl
import importlib.util
import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from mutants import PKG, ROOT, TEMPLATES, Mutant, changed_lines, mutants_of, template_of

RT = PKG + "runtime/"

# ------------------------------------------------------------------ what runs against what
_ENGINE_TESTS = [
    "tests/runtime/test_engine_lifecycle.py",
    "tests/runtime/test_engine_listing.py",
    "tests/runtime/test_engine_input.py",
    "tests/runtime/test_engine_pages.py",
    "tests/runtime/test_store_calls.py",
    "tests/runtime/test_ttl_under_work.py",
]
_REDIS_TESTS = [
    "tests/runtime/test_store_conformance_redis.py",
    "tests/runtime/test_engine_redis.py",
    "-k",
    "not ThroughRedisPy",
]

#: module (its path in the repository) -> the pytest arguments of the tests that concern it,
#: the quickest first (in-process before servers). A module's tests must pass unchanged (the
#: run checks that first) and should take seconds, not minutes: every mutant runs them, in
#: this order, until the first failure.
MODULES: dict[str, list[str]] = {
    RT + "engine/limits.py": [
        "tests/runtime/test_engine_listing.py",
        "tests/runtime/test_unstorable_text.py",
        "tests/security/test_memory_bounds.py",
        "tests/security/test_fair_limits.py",
    ],
    RT + "engine/task_engine.py": [*_ENGINE_TESTS, "tests/runtime/test_engine_config.py"],
    RT + "engine/runs.py": [*_ENGINE_TESTS, "tests/runtime/test_run_outcome_store.py"],
    RT + "serve/router.py": ["tests/mcp/test_router.py", "tests/mcp/test_both_faces.py"],
    RT + "faces/core.py": [
        "tests/runtime/test_wire_answers.py",
        "tests/runtime/test_engine_lifecycle.py",
        "tests/runtime/test_engine_listing.py",
        "tests/runtime/test_engine_pages.py",
        "tests/mcp/test_router.py",
    ],
    RT + "faces/extension.py": [
        "tests/runtime/test_wire_answers.py",
        "tests/security/test_ext_bad_input.py",
        "tests/mcp/test_both_faces.py",
    ],
    RT + "faces/common.py": [
        "tests/runtime/test_wire_answers.py",
        "tests/runtime/test_engine_lifecycle.py",
        "tests/mcp/test_both_faces.py",
    ],
    RT + "stores/memory.py": [
        "tests/runtime/test_store_conformance_memory_sqlite.py::TestInMemoryTaskStore",
        "tests/runtime/test_engine_listing.py",
        "-k",
        "not sqlite] and not redis]",
    ],
    RT + "stores/sqlite.py": [
        "tests/runtime/test_store_conformance_memory_sqlite.py::TestSqliteTaskStore",
        "tests/runtime/test_sqlite_group_commit.py",
        "tests/runtime/test_store_round_trips.py",
        "tests/runtime/test_engine_listing.py",
        "-k",
        "not memory] and not redis]",
    ],
    RT + "stores/redis/store.py": _REDIS_TESTS,
    RT + "stores/redis/scripts/*.lua": _REDIS_TESTS,
    RT + "serve/asgi_io.py": [
        "tests/mcp/test_task_endpoint_body.py",
        "tests/mcp/test_task_endpoint.py",
        "-k",
        "body or refusals",
    ],
    RT + "http/request_heads.py": ["tests/security/test_request_heads.py"],
    "generator/ir.py": [
        "tests/generator/test_pipeline.py",
        "tests/generator/test_faces.py",
        "tests/generator/test_template_context.py",
        "tests/generator/test_structure.py",
        "tests/generator/test_snapshots.py",
    ],
}

#: Mutants that change nothing a caller can see, left out of the score: (module path,
#: the line as written, stripped, the mutation) -> why. Keyed by text, not line number, so
#: an edit elsewhere in the module keeps the entry.
EQUIVALENT: dict[tuple[str, str, str], str] = {
    **{
        (TEMPLATES + "runtime/http/request_heads.py", "return 0, 0", what): (
            "the pair of a parser that counts no messages is only compared with itself "
            "(before and after a read): any constant pair answers the same"
        )
        for what in ("0 -> 1", "0 -> -1")
    },
    (
        TEMPLATES + "runtime/stores/redis/scripts/answer_inputs.lua",
        "for i = 6, #ARGV, 2 do",
        "2 -> 1 @19",
    ): (
        "stepping by one also tries each answer (a JSON object's text) as an input id: no "
        "pending input has such an id, so HDEL finds nothing and the answer is skipped"
    ),
    (
        TEMPLATES + "runtime/stores/redis/store.py",
        "if owner is not None and rec.status not in TERMINAL:  # an ended one left it already",
        "and -> or",
    ): (
        "the extra SREM (an ended task's owner, or the set of owner None) removes a member "
        "that is not there: a no-op"
    ),
    (
        TEMPLATES + "runtime/stores/redis/store.py",
        'tasks = [(tag, lex[LEX_PREFIX:], lex) for tag, lex in (m.split(":", 1) for m in members)]',
        "1 -> 2",
    ): (
        "neither the tag (hex) nor the lex key (hex and a URL-safe task id) holds a colon: "
        "one split or two give the same two parts"
    ),
}

# ------------------------------------------------------------------ running

OUTCOMES = ("killed", "survived", "timeout", "equivalent")
#: seconds one test may take under a mutant (pytest-timeout): a mutant that makes a test
#: hang fails it then, not at the whole run's timeout
PER_TEST_S = 90


class _Stop(Exception):
    pass


def _stop(signum: int, frame: Any) -> None:
    raise _Stop(signal.Signals(signum).name)


def _backup(path: Path) -> Path:
    return path.with_name(path.name + ".mutation-orig")


def restore_leftovers() -> None:
    """Put back any module a killed run left mutated."""
    for backup in ROOT.glob("**/*.mutation-orig"):
        target = backup.with_name(backup.name.removesuffix(".mutation-orig"))
        target.write_bytes(backup.read_bytes())
        _forget_bytecode(target)
        backup.unlink()
        print(f"restored {target.relative_to(ROOT)} from a run that did not finish")


def _forget_bytecode(path: Path) -> None:
    if path.suffix == ".py":
        cached = Path(importlib.util.cache_from_source(str(path)))
        for pyc in cached.parent.glob(path.stem + ".*.pyc"):
            pyc.unlink(missing_ok=True)


def run_tests(
    args: list[str], workers: int, timeout: float, first_failure: bool
) -> tuple[str, float]:
    """``(outcome, seconds)``: "passed", "failed" or "timeout"."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", str(workers)]
    if first_failure:  # a mutant: stop at the first failure; a test that hangs fails
        cmd += ["-x", "--timeout", str(PER_TEST_S)]
    cmd += args
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    start = time.monotonic()
    proc = subprocess.Popen(
        ["nice", "-n", "10", *cmd],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return "timeout", time.monotonic() - start
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    return ("passed" if code == 0 else "failed"), time.monotonic() - start


def try_mutant(m: Mutant, tests: list[str], workers: int, timeout: float) -> tuple[str, float]:
    path = ROOT / m.path
    original = path.read_bytes()
    backup = _backup(path)
    backup.write_bytes(original)
    try:
        path.write_text(m.source)
        _forget_bytecode(path)
        outcome, took = run_tests(tests, workers, timeout, first_failure=True)
    finally:
        path.write_bytes(original)
        _forget_bytecode(path)
        backup.unlink()
    return (
        "killed" if outcome == "failed" else "survived" if outcome == "passed" else outcome
    ), took


@dataclass
class Result:
    path: str
    template: str
    line: int
    what: str
    text: str
    outcome: str  # killed | survived | timeout | equivalent
    seconds: float
    why: str = ""


def _plan(args: argparse.Namespace, specs: list[str]) -> dict[str, list[Mutant]]:
    """Each module's mutants, sampled down to ``--cap`` (listed with ``--list``)."""
    plan: dict[str, list[Mutant]] = {}
    for spec in specs:
        found = list(mutants_of(spec))
        if args.since:
            found = [m for m in found if m.line in changed_lines(m.path, args.since)]
        total = len(found)
        if args.cap and len(found) > args.cap:
            rng = random.Random(f"{args.seed}:{spec}")
            found = sorted(rng.sample(found, args.cap), key=lambda m: (m.path, m.line))
        of = f" (a sample of {total})" if total > len(found) else ""
        print(f"{spec}: {len(found)} mutants{of}", flush=True)
        if args.list:
            for m in found:
                print(f"  {m.path}:{m.line}: {m.what}    {m.text}")
        if found:
            plan[spec] = found

    return plan


def _run(args: argparse.Namespace, plan: dict[str, list[Mutant]]) -> list[Result]:
    """Try the mutants of ``plan`` (one module after another in turn); the results."""
    results: list[Result] = []
    if args.resume and args.resume.exists():
        results = [Result(**r) for r in json.loads(args.resume.read_text())]
    done = {(r.path, r.text, r.what) for r in results}
    started = time.monotonic()
    timeouts: dict[str, float] = {}
    try:
        for spec in plan:  # each module's tests must pass unchanged
            if args.timeout:
                timeouts[spec] = args.timeout
                continue
            outcome, base = run_tests(MODULES[spec], args.workers, 1800, first_failure=False)
            if outcome != "passed":
                print(f"{spec}: its tests do not pass unchanged ({outcome}): skipped", flush=True)
                continue
            timeouts[spec] = max(60.0, 3 * base)
            print(f"{spec}: its tests take {base:.0f} s unchanged", flush=True)
        # round robin over the modules: a run stopped by --minutes has tried every one
        queue = sorted(
            ((i, spec, m) for spec in timeouts for i, m in enumerate(plan[spec])),
            key=lambda x: x[0],
        )
        for _, spec, m in queue:
            if (spec, m.text, m.what) in done:
                continue
            if args.minutes and time.monotonic() - started > args.minutes * 60:
                print(f"\n--minutes {args.minutes:g} reached: the other mutants not tried")
                break
            tpl, offset = template_of(m.path)
            why = EQUIVALENT.get((tpl, m.text, m.what), "")
            if why:
                outcome, took = "equivalent", 0.0
            else:
                outcome, took = try_mutant(m, MODULES[spec], args.workers, timeouts[spec])
            results.append(Result(spec, tpl, m.line - offset, m.what, m.text, outcome, took, why))
            if outcome == "survived":
                print(f"\nsurvived: {tpl}:{m.line - offset}: {m.what}    {m.text}", flush=True)
            else:
                mark = {"killed": ".", "timeout": "t", "equivalent": "e"}[outcome]
                print(mark, end="", flush=True)
            if args.json:  # as it goes: a run stopped early keeps what it found
                args.json.write_text(json.dumps([asdict(r) for r in results], indent=1))
    except (KeyboardInterrupt, _Stop) as stop:
        print(f"\nstopped ({stop or 'interrupt'}); every module restored", flush=True)
    report(results, time.monotonic() - started)
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--module", action="append", default=[], help="modules whose path has this")
    ap.add_argument("--since", metavar="REV", help="only lines changed since this git revision")
    ap.add_argument("--cap", type=int, default=10, help="mutants per module at most (0: all)")
    ap.add_argument("--seed", default="mutation", help="which mutants a capped module samples")
    ap.add_argument("--workers", type=int, default=0, help="pytest-xdist workers (0: none)")
    ap.add_argument("--minutes", type=float, default=0, help="start no mutant after (0: no limit)")
    ap.add_argument(
        "--timeout",
        type=float,
        default=0,
        help="seconds per mutant; skips the unchanged run of each module's tests (default: "
        "three times that run, at least a minute)",
    )
    ap.add_argument("--list", action="store_true", help="list the mutants; run nothing")
    ap.add_argument("--json", type=Path, help="write every result there")
    ap.add_argument("--resume", type=Path, help="keep the results in this file; try the others")
    args = ap.parse_args(argv)

    lock = (ROOT / ".mutation.lock").open("w")
    try:  # one run per checkout: another's backups are not leftovers
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        ap.error("another mutation run is going on in this checkout")
    restore_leftovers()
    signal.signal(signal.SIGTERM, _stop)
    specs = [s for s in MODULES if not args.module or any(m in s for m in args.module)]
    if not specs:
        ap.error(f"--module matches none of: {', '.join(MODULES)}")
    plan = _plan(args, specs)
    if args.list:
        return 0
    results = _run(args, plan)
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=1))
    return 1 if any(r.outcome == "survived" for r in results) else 0


def report(results: list[Result], seconds: float) -> None:
    summary: dict[str, dict[str, float]] = {}
    for r in results:
        row = summary.setdefault(r.path, dict.fromkeys([*OUTCOMES, "seconds"], 0.0))
        row[r.outcome] += 1
        row["seconds"] += r.seconds
    print(
        "\nmodule                                          killed survived timeout equiv  rate   time"
    )
    for spec, row in summary.items():
        killed, survived, timeout, equiv, secs = (int(row[k]) for k in (*OUTCOMES, "seconds"))
        n = killed + survived + timeout
        rate = f"{(killed + timeout) / n:6.1%}" if n else "     -"
        name = spec.removeprefix(PKG)
        print(f"{name:47s} {killed:6d} {survived:8d} {timeout:7d} {equiv:5d} {rate} {secs:5.0f} s")
    scored = [r for r in results if r.outcome != "equivalent"]
    caught = sum(r.outcome in ("killed", "timeout") for r in scored)
    if scored:
        print(
            f"\nkill rate {caught}/{len(scored)} = {caught / len(scored):.1%} in {seconds / 60:.1f} min"
        )
    survivors = [r for r in results if r.outcome == "survived"]
    if survivors:
        print("\nsurvivors:")
        for r in survivors:
            print(f"  {r.template}:{r.line}: {r.what}    {r.text}")
    equivalents = [r for r in results if r.outcome == "equivalent"]
    if equivalents:
        print("\nequivalent (not scored):")
        for r in equivalents:
            print(f"  {r.template}:{r.line}: {r.what}    {r.text}  -- {r.why}")


if __name__ == "__main__":
    sys.exit(main())
