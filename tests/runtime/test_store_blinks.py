"""The store blinks while tasks run: a Redis outage (with and without persistence, shorter
and longer than the lease, one and two instances) or an SQLite file locked by another
process across the end of running tasks, on both faces. Nothing computed is lost, nothing
stays ``working`` past its work, no live instance fails another's tasks, and every task's
end is checked exactly afterwards.

Real parts: a redis-server of each test's own (stopped and started again by PID), real
SQLite files, a real second process holding the lock. No timing assertions: every wait
is on an event, a log record or a poll with a deadline."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest

from mcp_tasks.errors import TaskError
from mcp_tasks.protocol import WORKING
from mcp_tasks.runtime import EngineConfig, SqliteTaskStore, TaskEngine
from mcp_tasks.runtime.engine.coordination import LEASE_EXPIRED_MESSAGE
from mcp_tasks.runtime.engine.outcomes import NOT_STARTED_MESSAGE
from mcp_tasks.runtime.stores.redis import RedisTaskStore
from mcp_tasks.store import TaskRecord, TaskStore
from testkit.blinks import (
    CORE,
    EXTENSION,
    FACES,
    Face,
    Gate,
    Logs,
    SqliteLock,
    count_reads,
    result_of,
    runtime_logs,
)
from testkit.procs import running
from testkit.redis_fixtures import RedisServer, unique_namespace
from testkit.wait import until_async

pytestmark = pytest.mark.anyio

#: every test's engines sweep often: the kept outcomes and leases are the sweep's too
CONFIG = {"sweep_interval_s": 0.1, "cursor_secret": b"blinks"}


def redis_store(url: str, ns: str, lease_s: float = 10.0) -> RedisTaskStore:
    """A store that notices an outage within a second (a short socket timeout)."""
    return RedisTaskStore(url, namespace=ns, lease_s=lease_s, socket_timeout_s=1.0)


async def start_on_both_faces(engine: TaskEngine, gate: Gate, n: int) -> list[tuple[Face, str]]:
    out = []
    for name in FACES:
        face = Face(engine, name)
        out += [(face, await face.start(gate.work)) for _ in range(n)]
    await until_async(lambda: gate.started == len(out), what="every work started")
    return out


class HeldResult:
    """A core ``tasks/result`` held on an instance from before the blink (R-RESULT-2)."""

    def __init__(self, face: Face, task_id: str) -> None:
        self.face, self.task_id = face, task_id
        self.answer: dict[str, Any] | None = None
        self.error: TaskError | None = None
        self.done = anyio.Event()
        self.reads = count_reads(face.engine.store)

    async def hold(self, tg: anyio.abc.TaskGroup) -> None:
        """Start it; return once it has read its task (it waits from then on)."""
        before = self.reads[self.task_id]
        tg.start_soon(self.run)
        await until_async(lambda: self.reads[self.task_id] > before, what="tasks/result read it")

    async def run(self) -> None:
        try:
            self.answer = await self.face.result(self.task_id)
        except TaskError as exc:
            self.error = exc
        finally:
            self.done.set()


# ---------------------------------------------------------------- Redis: one instance


async def work_ends_in_outage(
    server: RedisServer,
    engine: TaskEngine,
    logs: Logs,
    n: int,
    once_back: Callable[[list[tuple[Face, str]]], Awaitable[None]] | None = None,
) -> tuple[list[tuple[Face, str]], HeldResult]:
    """Start ``n`` tasks on both faces and hold the first one's ``tasks/result``; stop
    Redis and let the work end (every outcome's first write fails: the log says so); start
    Redis again, run ``once_back``, and wait for the held result's answer."""
    gate = Gate()
    tasks = await start_on_both_faces(engine, gate, n)
    held = HeldResult(*tasks[0])
    async with anyio.create_task_group() as tg:
        await held.hold(tg)
        server.stop()
        gate.release.set()
        await until_async(lambda: all(logs.mentions(tid) for _, tid in tasks))
        server.start()
        if once_back is not None:
            await once_back(tasks)
        with anyio.fail_after(60):
            await held.done.wait()
    return tasks, held


async def test_outcome_of_work_ending_in_redis_outage_is_stored_once_back(
    tmp_path: Path,
) -> None:
    """Work ends while Redis (append-only) is down: its outcome is kept and written again
    until Redis takes it; meanwhile the task is ``working`` and holds its active slot; a
    ``tasks/result`` held on this instance gets the real result (never a -32603), and
    afterwards every task is completed exactly (R-RESULT-1, X-GET-9), none stuck."""
    server = RedisServer(tmp_path / "redis", persist=True)
    with running(server), runtime_logs() as logs:
        store = redis_store(server.url, unique_namespace())
        try:
            async with TaskEngine(store, EngineConfig(**CONFIG)) as engine:

                async def completed(tasks: list[tuple[Face, str]]) -> None:
                    for face, tid in tasks:
                        await face.assert_completed_exactly(tid)

                tasks, held = await work_ends_in_outage(server, engine, logs, 3, completed)
                assert held.error is None, held.error
                assert (
                    held.answer is not None
                    and held.answer["content"] == (result_of(held.task_id)["content"])
                )
                assert await store.count_active("alice") == 0  # no slot held (R-SEC-4)
                await until_async(lambda: engine.running == 0)
        finally:
            await store.close()


async def test_redis_without_persistence_loses_tasks_but_nothing_hangs(tmp_path: Path) -> None:
    """Redis restarted without persistence has lost the tasks: the kept outcomes have
    nothing to write to; the tasks answer "not found" (R-TTL-3, X-GET-8), the engine keeps
    nothing running, and a held ``tasks/result`` is answered, not left waiting."""
    server = RedisServer(tmp_path / "redis")
    with running(server), runtime_logs() as logs:
        store = redis_store(server.url, unique_namespace())
        try:
            async with TaskEngine(store, EngineConfig(**CONFIG)) as engine:
                tasks, held = await work_ends_in_outage(server, engine, logs, 2)
                await until_async(lambda: engine.running == 0)
                assert held.error is not None and held.error.code == -32602
                for face, tid in tasks:
                    with pytest.raises(TaskError) as err:
                        await face.get(tid)
                    assert err.value.code == -32602
        finally:
            await store.close()


# ---------------------------------------------------------------- Redis: two instances


@pytest.mark.parametrize("outage", ["shorter", "longer"])
async def test_outage_against_the_lease_fails_no_live_instance(tmp_path: Path, outage: str) -> None:
    """Two live instances on one Redis (append-only), tasks running on both, Redis down for
    less or more than the lease: no instance fails the other's tasks (they were alive all
    along), every task completes exactly once its work ends. A third instance that died
    during the outage is still reaped: its task ends ``failed`` with the lease message."""
    lease = 1.5
    server = RedisServer(tmp_path / "redis", persist=True)
    ns = unique_namespace()
    with running(server), runtime_logs():
        stores = [redis_store(server.url, ns, lease) for _ in range(3)]
        try:
            async with (
                TaskEngine(stores[0], EngineConfig(**CONFIG)) as a,
                TaskEngine(stores[1], EngineConfig(**CONFIG)) as b,
            ):
                gate = Gate()
                tasks = [(f, await f.start(gate.work)) for e in (a, b) for f in (Face(e, CORE),)]
                tasks += [
                    (f, await f.start(gate.work)) for e in (a, b) for f in (Face(e, EXTENSION),)
                ]
                dead_face: Face | None = None
                async with TaskEngine(stores[2], EngineConfig(**CONFIG)) as c:
                    dead_face = Face(c, CORE)
                    dead = await dead_face.start(Gate().work)  # never released
                    await until_async(lambda: gate.started == len(tasks))
                    server.stop()
                # c is gone (its engine stopped while Redis was down: nothing it could say)
                await anyio.sleep(lease * (0.5 if outage == "shorter" else 2.5))
                server.start()
                # the dead instance is reaped (after a lease of working store) ...
                reaped = await Face(a, CORE).ended(dead, timeout=60)
                assert reaped["status"] == "failed"
                assert reaped["statusMessage"] == LEASE_EXPIRED_MESSAGE
                # ... while the live ones' tasks still run
                for face, tid in tasks:
                    assert (await face.get(tid))["status"] == "working", tid
                gate.release.set()
                for face, tid in tasks:
                    await face.assert_completed_exactly(tid)
        finally:
            for s in stores:
                await s.close()


async def test_held_results_across_an_outage_say_what_happened_R_ERR_1(tmp_path: Path) -> None:
    """``tasks/result`` held on both instances when Redis goes down at the task's end: the
    one on the instance running the work answers the real result once Redis is back (never
    the error of an outcome that "could not be stored"); the one on the other instance can
    only say "Task store unavailable" (-32603, exactly that), and a new one after the
    outage answers the result (R-RESULT-1)."""
    server = RedisServer(tmp_path / "redis", persist=True)
    ns = unique_namespace()
    with running(server), runtime_logs() as logs:
        sa, sb = redis_store(server.url, ns), redis_store(server.url, ns)
        try:
            async with (
                TaskEngine(sa, EngineConfig(**CONFIG)) as a,
                TaskEngine(sb, EngineConfig(**CONFIG)) as b,
            ):
                gate = Gate()
                on_a, on_b = Face(a, CORE), Face(b, CORE)
                tid = await on_a.start(gate.work)
                await until_async(lambda: gate.started == 1)
                here, there = HeldResult(on_a, tid), HeldResult(on_b, tid)
                async with anyio.create_task_group() as tg:
                    await here.hold(tg)
                    await there.hold(tg)
                    server.stop()
                    gate.release.set()
                    await until_async(lambda: logs.mentions(tid))
                    with anyio.fail_after(60):
                        await there.done.wait()  # its fallback read found Redis down
                    server.start()
                    with anyio.fail_after(60):
                        await here.done.wait()
                assert here.error is None, here.error
                assert here.answer is not None
                assert here.answer["content"] == result_of(tid)["content"]
                assert there.error is not None
                assert there.error.to_error() == {
                    "code": -32603,
                    "message": "Task store unavailable",
                }
                with anyio.fail_after(60):
                    assert (await on_b.result(tid))["content"] == result_of(tid)["content"]
        finally:
            await sa.close()
            await sb.close()


# ---------------------------------------------------------------- SQLite: a lock across the end


async def test_sqlite_locked_across_task_ends_keeps_every_result(tmp_path: Path) -> None:
    """Another process holds ``BEGIN EXCLUSIVE`` on the file while tasks end (longer than
    the busy timeout): "database is locked" is transient; the outcomes are kept and written
    once the lock is gone, every task completes exactly on both faces, and a held
    ``tasks/result`` gets the real result, not the error of an outcome that "could not be
    stored" (R-RESULT-1)."""
    db = tmp_path / "tasks.db"
    lock = SqliteLock(db)
    with runtime_logs() as logs:
        store = SqliteTaskStore(db)
        try:
            async with TaskEngine(store, EngineConfig(**CONFIG)) as engine:
                gate = Gate()
                tasks = await start_on_both_faces(engine, gate, 3)
                held = HeldResult(*tasks[0])
                try:
                    async with anyio.create_task_group() as tg:
                        await held.hold(tg)
                        await lock.take()
                        gate.release.set()
                        await until_async(lambda: gate.returned == len(tasks))
                        # readers still see the tasks working (WAL) while writes wait
                        assert (await tasks[1][0].get(tasks[1][1]))["status"] == "working"
                        await until_async(lambda: logs.mentions("database is locked"))
                        lock.release()
                        for face, tid in tasks:
                            await face.assert_completed_exactly(tid)
                        with anyio.fail_after(60):
                            await held.done.wait()
                finally:
                    lock.release()
                assert held.error is None, held.error
                assert held.answer is not None
                assert held.answer["content"] == result_of(held.task_id)["content"]
                assert await store.count_active("alice") == 0
                await until_async(lambda: engine.running == 0)
        finally:
            await store.close()


# ---------------------------------------------------------------- a creation's reply lost


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
@pytest.mark.parametrize("face_name", FACES)
async def test_creation_written_though_the_store_failed_ends_failed_not_stuck_R_ERR_1(
    tmp_path: Path, backend: str, face_name: str
) -> None:
    """The store writes a new task but its answer is lost (Redis ran the script, then the
    connection broke): the requestor is told "Task store unavailable" (R-ERR-1), and the
    task, which no work will ever end, does not stay ``working``: a sweep fails it saying
    why and it holds no active slot (R-SEC-4)."""
    with ExitStack() as stack:
        store: TaskStore
        if backend == "sqlite":
            store = SqliteTaskStore(tmp_path / "tasks.db")
        else:
            server = stack.enter_context(running(RedisServer(tmp_path / "redis")))
            store = redis_store(server.url, unique_namespace())
        written = store.create_limited

        async def reply_lost(rec: TaskRecord, max_active: int) -> bool:
            await written(rec, max_active)
            raise ConnectionError("the connection broke before the reply")

        store.create_limited = reply_lost  # type: ignore[method-assign]
        cfg = EngineConfig(**CONFIG, outcome_retry_s=0.05, outcome_retry_max_s=0.2)
        try:
            async with TaskEngine(store, cfg) as engine:
                face = Face(engine, face_name)
                with pytest.raises(TaskError) as err:
                    await face.start(Gate().work)
                assert err.value.to_error() == {"code": -32603, "message": "Task store unavailable"}
                store.create_limited = written  # type: ignore[method-assign]
                assert engine.running == 0  # no work was started for it
                [rec] = await store.list_tasks("alice", after=None, limit=10)
                assert rec.status == WORKING  # as written
                got = await face.ended(rec.task_id)
                assert got["status"] == "failed" and got["statusMessage"] == NOT_STARTED_MESSAGE
                assert await store.count_active("alice") == 0
                assert not engine.runs.doubts.doubtful
        finally:
            await store.close()
