"""The engine's parts, each on its own with fakes of its narrow inputs (no engine, no store):
the events sink, the run supervisor, renewals, the settler of kept outcomes, progress notes;
and the shape that keeps them apart (no part imports the engine, only the executors'
registry imports an executor, only the supervisor makes and registers runs)."""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest

from mcp_tasks.errors import StoreUnavailable
from mcp_tasks.protocol import COMPLETED, FAILED, TOOLS_CALL, WORKING, TaskStatus
from mcp_tasks.runtime.engine import events as events_module
from mcp_tasks.runtime.engine.config import EngineConfig
from mcp_tasks.runtime.engine.events import EngineEvents
from mcp_tasks.runtime.engine.outcomes import Settler
from mcp_tasks.runtime.engine.progress import ProgressNotes
from mcp_tasks.runtime.engine.renewals import Renewals
from mcp_tasks.runtime.engine.runs import Outcome, Run, RunTtl, TaskContext
from mcp_tasks.runtime.engine.supervisor import RunSupervisor
from mcp_tasks.store import TaskRecord

pytestmark = pytest.mark.anyio

RUNTIME = Path(__file__).resolve().parents[2] / "generated" / "mcp_tasks" / "runtime"
#: the engine's parts: what the engine is built from
PARTS = (
    "coordination", "events", "executor", "executors", "guard", "limits", "offload",
    "outcomes", "progress", "renewals", "runs", "store_writer", "supervisor", "tombstones",
    "waiting",
)  # fmt: skip
#: the executors (their modules), which only the registry (and the worker process) imports
EXECUTORS = {"offload", "worker"}


def record(task_id: str = "t1", status: TaskStatus = WORKING, **kw: Any) -> TaskRecord:
    fields: dict[str, Any] = {"ttl_ms": None, **kw}
    return TaskRecord(
        task_id=task_id, requestor="alice", method=TOOLS_CALL, status=status,
        created_at=0.0, last_updated_at=0.0, poll_interval_ms=100, face="f", **fields,
    )  # fmt: skip


def imported(path: Path) -> set[str]:
    """The runtime modules ``path`` imports, ``TYPE_CHECKING`` ones included."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                out.add(node.module.split(".")[0])
            else:
                out |= {alias.name for alias in node.names}
    return out


# ---------------------------------------------------------------------- the shape


def test_no_part_imports_the_engine() -> None:
    found = {p: imported(RUNTIME / f"{p}.py") & {"engine"} for p in PARTS}
    assert not {p for p, names in found.items() if names}, found


def test_only_the_registry_imports_an_executor() -> None:
    importers = {
        path.stem
        for path in RUNTIME.rglob("*.py")
        if imported(path) & EXECUTORS and path.stem not in EXECUTORS
    }
    assert importers == {"executors"}, importers


def test_only_the_supervisor_makes_and_registers_runs() -> None:
    """No other module builds a ``Run`` or writes the runs by task ID."""
    offenders = []
    for path in RUNTIME.rglob("*.py"):
        if path.stem in ("supervisor", "runs"):
            continue
        text = path.read_text(encoding="utf-8")
        for needle in (" Run(", "._active", "active[", ".active.pop", ".active.update"):
            if needle in text:
                offenders.append(f"{path.name}: {needle.strip()}")
    assert not offenders, offenders


# ---------------------------------------------------------------------- the events sink


async def test_observers_see_a_change_while_a_status_listener_is_stuck_R_NOTIFY_2() -> None:
    sink = EngineEvents()
    seen: list[TaskStatus] = []
    sent: list[TaskStatus] = []
    stuck = anyio.Event()

    async def stuck_listener(rec: TaskRecord) -> None:
        sent.append(rec.status)
        await stuck.wait()

    sink.on_changed.append(lambda rec: seen.append(rec.status))
    sink.on_status.append(stuck_listener)
    async with anyio.create_task_group() as tg:
        tg.start_soon(sink.send)
        sink.status(record(status=WORKING))
        sink.status(record(status=COMPLETED))
        assert seen == [WORKING, COMPLETED]  # inline, before any notification
        await anyio.wait_all_tasks_blocked()
        assert sent == [WORKING] and sink.pending() == 1  # in order, queued behind it
        stuck.set()
        await anyio.wait_all_tasks_blocked()
        assert sent == [WORKING, COMPLETED] and sink.pending() == 0
        tg.cancel_scope.cancel()


async def test_the_queue_of_a_stuck_listener_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(events_module, "QUEUE_MAX", 3)
    sink = EngineEvents()
    sent: list[str] = []

    async def listener(rec: TaskRecord) -> None:
        sent.append(rec.task_id)

    sink.on_status.append(listener)
    for i in range(5):  # no sender runs: all wait
        sink.status(record(f"t{i}"))
    assert sink.pending() == 3 and sink.dropped == 2
    await sink.drain()
    assert sent == ["t2", "t3", "t4"]  # the oldest went first


async def test_end_hooks_run_in_order_and_one_that_fails_stops_none() -> None:
    sink = EngineEvents()
    calls: list[tuple[str, int]] = []

    async def broken(rec: TaskRecord, size: int) -> None:
        raise RuntimeError("boom")

    async def kept(rec: TaskRecord, size: int) -> None:
        calls.append((rec.task_id, size))

    sink.on_ended += [broken, kept]
    await sink.ended(record(), 42)
    assert calls == [("t1", 42)]


# ---------------------------------------------------------------------- the supervisor


class FakeWriter:
    """The store writer: transitions go to ``write`` (a record, None, or an exception)."""

    def __init__(self, write: Callable[[str, TaskStatus, dict[str, Any]], Any]) -> None:
        self.write = write
        self.calls: list[tuple[str, TaskStatus]] = []
        self.shared = False
        self.clock = lambda: 1.0
        #: the coordination: told of work started here, nothing else used
        self.started_ids: list[str] = []
        self.coordination = self
        self.guard = None

    def started(self, tg: anyio.abc.TaskGroup, task_id: str, run: Run) -> None:
        self.started_ids.append(task_id)

    async def transition(self, task_id: str, status: TaskStatus, **kw: Any) -> TaskRecord | None:
        self.calls.append((task_id, status))
        got = self.write(task_id, status, kw)
        if isinstance(got, BaseException):
            raise got
        return got  # type: ignore[no-any-return]


def stored(task_id: str, status: TaskStatus, kw: dict[str, Any]) -> TaskRecord:
    return record(task_id, status, result=kw.get("result"), error=kw.get("error"))


async def test_waiters_wake_before_the_change_is_told_R_RESULT_2() -> None:
    """When the status observers hear of the end, the run's waiters are woken already and
    hold the record its outcome stored (no read); the end hook (the engine's retention)
    gets the outcome's size."""
    writer = FakeWriter(stored)
    sink = EngineEvents()
    sup = RunSupervisor(writer, sink, EngineConfig(sweep_interval_s=3600))  # type: ignore[arg-type]
    at_telling: list[tuple[bool, bool, bool]] = []
    ends: list[int] = []
    release = anyio.Event()

    async def end_hook(rec: TaskRecord, size: int) -> None:
        ends.append(size)

    async def work(tc: TaskContext) -> dict[str, Any]:
        await release.wait()
        return {"content": [], "structuredContent": {"n": 1}}

    sink.on_ended.append(end_hook)
    async with anyio.create_task_group() as tg:
        sup.open(tg)
        run = sup.register("t1", "alice", FAILED, 0.0, None)
        sup.start(record(), run, work, None, None)
        await anyio.wait_all_tasks_blocked()
        assert sup.running_here("t1") and sup.counts() == (1, 0)
        woken = run.changed  # what a held tasks/result waits on
        sink.on_changed.append(
            lambda rec: at_telling.append(
                (woken.is_set(), run.final is rec, sup.running_here("t1"))
            )
        )
        release.set()
        await anyio.wait_all_tasks_blocked()
        tg.cancel_scope.cancel()
    assert at_telling == [(True, True, False)]
    assert sup.ended("t1") and writer.calls == [("t1", COMPLETED)] and ends and ends[0] > 0
    assert await sup.stored_outcome("t1", "alice") is None  # ended: read the record kept


async def test_an_outcome_the_store_did_not_take_is_kept_and_written_again() -> None:
    """A store blink: the outcome is kept on its run (the task stays running here, a waiter
    waits on it) and the settler's next write stores it."""
    down = [True]

    def write(task_id: str, status: TaskStatus, kw: dict[str, Any]) -> Any:
        return StoreUnavailable() if down[0] else stored(task_id, status, kw)

    writer = FakeWriter(write)
    sup = RunSupervisor(writer, EngineEvents(), EngineConfig(sweep_interval_s=3600))  # type: ignore[arg-type]

    async def work(tc: TaskContext) -> dict[str, Any]:
        return {"content": []}

    async with anyio.create_task_group() as tg:
        sup.open(tg)
        run = sup.register("t1", "alice", FAILED, 0.0, None)
        sup.start(record(), run, work, None, None)
        await anyio.wait_all_tasks_blocked()
        assert run.kept is not None and sup.running_here("t1") and len(sup.settler) == 1
        assert sup.counts() == (0, 0)  # its work returned: only its outcome is left
        down[0] = False
        run.kept.retry_at = 0.0  # its time came
        await sup.settler.retry_due()
        tg.cancel_scope.cancel()
    assert run.final is not None and run.final.status == COMPLETED
    assert not sup.running_here("t1") and len(sup.settler) == 0
    assert len(writer.calls) >= 2 and set(writer.calls) == {("t1", COMPLETED)}


# ---------------------------------------------------------------------- renewals


class FakeGuard:
    def __init__(self, supported: bool = True) -> None:
        self.supported = supported
        self.ttls: list[int] = []
        self.store = object()

    async def set_ttl(self, task_id: str, ttl_ms: int) -> TaskRecord | None:
        if not self.supported:
            raise NotImplementedError
        self.ttls.append(ttl_ms)
        return record(task_id, ttl_ms=ttl_ms)


def renewals(guard: FakeGuard, **cfg: Any) -> Renewals:
    writer = type("W", (), {"guard": guard, "shared": False, "clock": staticmethod(lambda: 0.0)})()
    return Renewals(writer, EngineConfig(**cfg))  # type: ignore[arg-type]


async def test_a_ttl_near_its_end_is_renewed_never_past_the_maximum_R_SEC_4() -> None:
    guard = FakeGuard()
    ren = renewals(guard, max_ttl_ms=60_000, renew_ahead_s=5.0, sweep_interval_s=1.0)
    ttl = RunTtl(created_at=0.0, ttl_ms=10_000)
    await ren.renew_due([("t1", ttl)], now=1.0)  # expires at 10 s: not due yet
    assert guard.ttls == []
    await ren.renew_due([("t1", ttl)], now=6.0)
    assert guard.ttls == [16_000] and ttl.renewed  # now + ttl
    await ren.renew("t1", ttl, now=58.0)
    assert guard.ttls[-1] == 60_000  # at most max_ttl_ms from creation


async def test_a_stopped_run_is_not_renewed_and_a_store_without_ttls_turns_renewals_off() -> None:
    guard = FakeGuard()
    ren = renewals(guard)
    ttl = RunTtl(created_at=0.0, ttl_ms=1_000)
    ttl.stopped = True
    assert await ren.renew("t1", ttl, now=0.9) is None and guard.ttls == []
    off = renewals(FakeGuard(supported=False))
    assert await off.renew("t1", RunTtl(0.0, 1_000), now=0.9) is None
    assert not off.on


# ---------------------------------------------------------------------- the settler


async def test_the_settler_gives_up_on_an_outcome_past_keeping() -> None:
    ended: list[str] = []
    writes: list[str] = []

    async def store(task_id: str, run: Run, outcome: Outcome, size: int) -> bool:
        writes.append(task_id)
        return False

    past = [False]
    settler = Settler(EngineConfig(), store, lambda t, r: ended.append(t), lambda ttl: past[0])
    run = Run("alice")
    settler.keep("t1", run, (COMPLETED, None, {"content": []}, None))
    assert run.kept is not None
    run.kept.retry_at = 0.0
    await settler.retry_due()
    assert writes == ["t1"] and run.kept.attempts == 2 and ended == []
    past[0] = True
    run.kept.retry_at = 0.0
    await settler.retry_due()
    assert writes == ["t1"] and ended == ["t1"] and settler.left() == []


# ---------------------------------------------------------------------- progress


async def test_progress_is_throttled_and_the_latest_report_is_written() -> None:
    written: list[str] = []
    running = {"t1"}

    async def write(task_id: str, text: str) -> None:
        written.append(text)

    async with anyio.create_task_group() as tg:
        notes = ProgressNotes(0.05, running.__contains__, write, lambda: tg)
        await notes.note("t1", "1 of 3")
        await notes.note("t1", "2 of 3")  # within the interval: kept for its end
        await notes.note("t1", "3 of 3")
        assert written == ["1 of 3"]
        with anyio.fail_after(5):
            while len(written) < 2:
                await anyio.sleep(0.01)
        await notes.note("t2", "not running here")
    assert written == ["1 of 3", "3 of 3"]
