"""Outcomes kept until the store takes them, and the ttls of running work renewed.

**Kept outcomes.** A run's outcome is written once as its work returns (no extra store call
when that write succeeds). When the store does not take it (``StoreUnavailable``: Redis
unreachable, an SQLite file locked or busy), nothing is lost: the outcome is kept on its
``Run``, which stays in ``Runs.active``, so the task is ``working`` to readers (as the
store has it), keeps its active slot, and a ``tasks/result`` waiting here waits on that run
and gets the outcome the moment it is stored. The :class:`Settler` writes it again, first
after ``EngineConfig.outcome_retry_s``, then twice as long each time up to
``outcome_retry_max_s``, and every sweep looks too, until the store takes it, the task is
gone (another instance ended or expired it, or the store lost it: nothing to write), or the
task can no longer be kept (its ttl ended, see below). Only an outcome that is not JSON at
all (``UnstorableValue``) is replaced, by ``failed`` saying why.

**Creations in doubt.** A creation the store answered with a failure (``StoreUnavailable``)
may still have been written: Redis can run a script whose reply the connection then loses.
Such a task would be ``working`` with no work anywhere, its owner alive (no lease expires)
and its requestor told it was not created. Its ID is kept (at most ``DOUBTFUL_MAX``) and,
no sooner than ``outcome_retry_max_s`` after the failure (a write still in flight has landed
by then), every sweep moves it to ``failed`` with :data:`NOT_STARTED_MESSAGE` if it exists
and is not terminal (nothing changes when it was never written), until a store answers or
its ttl ends. So no task stays ``working`` without work here.

**Renewals.** With ``EngineConfig.keep_running_tasks`` (the default) a task does not expire
while its work runs here: each sweep renews the ttl of every run whose expiry is nearer
than ``EngineConfig.renew_lead_s`` (a lookup that finds it past its expiry renews it on the
spot), by the ttl asked for but at least twice that lead, never past ``max_ttl_ms`` from
creation (there the work is stopped and the task expires, R-SEC-4). When the work of a task
ends after its original expiry, the outcome's write first sets the ttl to end ``ttl`` after
now: the task is kept for its ttl after its end (R-TTL-3). Every renewal is reported as the
task's actual ttl (R-TTL-2, X-TTL-3). A store without ``set_ttl`` keeps ttls as created.
"""

from __future__ import annotations

import logging
import math
import time
from typing import TYPE_CHECKING

import anyio
import anyio.abc

from ..errors import InternalError, TaskError
from ..protocol import FAILED, NON_TERMINAL
from ..store import TaskRecord, UnstorableValue
from .limits import outcome_size

if TYPE_CHECKING:
    from .engine import TaskEngine
    from .runs import Outcome, Run

log = logging.getLogger(__name__.rsplit(".", 2)[0] + ".runtime")

#: statusMessage of a task whose creation the store answered with a failure but wrote
NOT_STARTED_MESSAGE = "Task failed: it was not started (the task store failed as it was created)"
#: creations in doubt kept at most (the oldest is dropped, logged, beyond)
DOUBTFUL_MAX = 10_000


def unstorable(exc: UnstorableValue) -> Outcome:
    """The outcome that replaces one no store can encode: ``failed``, saying why."""
    err = InternalError(detail=f"the task's result could not be stored: {exc.reason}")
    return (
        FAILED,
        f"Task failed: its result could not be stored: {exc.reason}",
        None,
        err.to_error(),
    )


class Renewals:
    """The ttls of tasks whose work runs here, renewed before they run out."""

    def __init__(self, engine: TaskEngine) -> None:
        self.engine = engine
        #: False once the store said it cannot change a ttl (``NotImplementedError``)
        self.supported = True

    @property
    def on(self) -> bool:
        return self.supported and self.engine.config.keep_running_tasks

    def _hard(self, run: Run) -> float:
        """When ``run``'s task expires at the latest: ``max_ttl_ms`` after its creation."""
        return run.created_at + self.engine.config.max_ttl_ms / 1000.0

    async def _set(self, task_id: str, run: Run, target: float) -> TaskRecord | None:
        ttl = math.ceil((target - run.created_at) * 1000)
        ttl_ms = max(0, min(ttl, self.engine.config.max_ttl_ms))  # never past the maximum
        try:
            rec = await self.engine.guard.set_ttl(task_id, ttl_ms)
        except NotImplementedError:
            self.supported = False
            log.warning(
                "%s cannot renew a ttl: tasks expire under their work (keep_running_tasks)",
                type(self.engine.store).__name__,
            )
            return None
        if rec is not None:
            run.expires_at = rec.expires_at
            run.renewed = True
        return rec

    async def renew(self, task_id: str, run: Run, now: float) -> TaskRecord | None:
        """Push ``run``'s expiry ahead (see the module); the new record, or None when it
        cannot be renewed (unlimited, at its maximum, unknown). Raises ``TaskError``."""
        if not self.on or run.ttl_ms is None or run.expires_at is None:
            return None
        if run.scope.cancel_called:  # ended elsewhere (a cancel, an expiry): not renewed
            return None
        async with self._lock(run):
            if run.scope.cancel_called or run.expires_at is None:
                return None
            lead = self.engine.config.renew_lead_s
            target = min(self._hard(run), now + max(run.ttl_ms / 1000.0, 2 * lead))
            if target <= run.expires_at:
                return None
            return await self._set(task_id, run, target)

    @staticmethod
    def _lock(run: Run) -> anyio.Lock:
        """One ttl change of ``run`` at a time, so the one made at its end comes last."""
        if run.ttl_lock is None:
            run.ttl_lock = anyio.Lock()
        return run.ttl_lock

    async def before_outcome(self, task_id: str, run: Run, now: float) -> None:
        """The work of ``run`` ended: a task whose work outlived its original expiry is kept
        ``ttl`` from now (within its maximum). Raises ``TaskError``."""
        if not self.on or run.ttl_ms is None or run.expires_at is None:
            return
        if run.ttl_lock is None and not run.renewed:  # no renewal was ever started
            if now < run.created_at + run.ttl_ms / 1000.0:
                return  # ended in time: kept until createdAt + ttl, as asked (no store call)
        async with self._lock(run):
            if not run.renewed and now < run.created_at + run.ttl_ms / 1000.0:
                return
            end = max(now, run.created_at) + run.ttl_ms / 1000.0
            await self._set(task_id, run, min(self._hard(run), end))

    def started(self, tg: anyio.abc.TaskGroup, task_id: str, run: Run) -> None:
        """Work of ``task_id`` started here. On a shared store a ttl shorter than the lead
        is renewed at once, not at this engine's next sweep: another instance's sweep may
        come first and would expire the task under its work."""
        ttl = run.ttl_ms
        if self.on and self.engine.store.shared and ttl is not None:
            if ttl / 1000.0 < self.engine.config.renew_lead_s:
                tg.start_soon(self._renew_now, task_id, run)

    async def _renew_now(self, task_id: str, run: Run) -> None:
        if not run.busy:  # its work returned already: kept until createdAt + ttl, as asked
            return
        try:
            await self.renew(task_id, run, self.engine.clock())
        except TaskError:
            pass  # the store is unavailable: the next sweep tries again

    async def renew_due(self, now: float) -> None:
        """Every sweep: renew the runs whose expiry is nearer than the lead."""
        if not self.on:
            return
        lead = self.engine.config.renew_lead_s
        due = [
            (tid, run)
            for tid, run in self.engine.runs.active.items()
            if run.expires_at is not None and run.expires_at - now < lead
        ]
        for task_id, run in due:
            try:
                await self.renew(task_id, run, now)
            except TaskError:
                return  # the store is unavailable: the next sweep tries again


class Settler:
    """The outcomes the store did not take yet, by task ID, written again with backoff."""

    def __init__(self, engine: TaskEngine) -> None:
        self.engine = engine
        self.kept: dict[str, Run] = {}
        #: creations in doubt (see the module): task ID -> (when to look, when to give up)
        self.doubtful: dict[str, tuple[float, float | None]] = {}
        self._wake: anyio.Event | None = None

    def doubt(self, task_id: str, expires_at: float | None) -> None:
        """The store answered the creation of ``task_id`` with a failure: it may exist."""
        doubtful = self.doubtful
        if len(doubtful) >= DOUBTFUL_MAX:
            oldest = next(iter(doubtful))
            del doubtful[oldest]
            log.warning("task %s: too many creations in doubt; no longer looked at", oldest)
        look_at = time.monotonic() + self.engine.config.outcome_retry_max_s
        doubtful[task_id] = (look_at, expires_at)

    async def settle_doubtful(self) -> None:
        """Every sweep: fail the creations in doubt that were written after all."""
        now = time.monotonic()
        due = [tid for tid, (look_at, _) in self.doubtful.items() if look_at <= now]
        if not due:
            return
        err = InternalError(message=NOT_STARTED_MESSAGE).to_error()

        async def settle(task_id: str) -> None:
            expires_at = self.doubtful[task_id][1]
            try:
                rec = await self.engine.transition(
                    task_id,
                    FAILED,
                    expected=NON_TERMINAL,
                    status_message=NOT_STARTED_MESSAGE,
                    error=err,
                )
            except TaskError:
                if expires_at is None or expires_at > self.engine.clock():
                    return  # the store is still unavailable: the next sweep looks again
                rec = None
            self.doubtful.pop(task_id, None)
            if rec is not None:
                log.warning("task %s: created though the store said not; failed", task_id)
                await self.engine.status_changed(rec)

        async with anyio.create_task_group() as tg:  # concurrent: one pipeline, one commit
            for task_id in due:
                tg.start_soon(settle, task_id)

    def __len__(self) -> int:
        return len(self.kept)

    async def store(self, task_id: str, run: Run, outcome: Outcome, size: int) -> bool:
        """One write of ``outcome`` (``size`` bytes of result and error, for the byte cap);
        True once settled (stored, or nothing is left to store: the task already ended
        elsewhere or is gone), False when the store did not take it."""
        engine = self.engine
        run.storing = True
        try:
            await engine.renewals.before_outcome(task_id, run, engine.clock())
            try:
                rec = await self._write(task_id, outcome)
            except UnstorableValue as exc:
                log.error("task %s: its outcome cannot be stored: %s", task_id, exc.reason)
                outcome = run.kept = unstorable(exc)
                size = outcome_size(outcome[2], outcome[3], outcome[1])
                rec = await self._write(task_id, outcome)
        except TaskError:
            return False  # the store's own log says why (once per outage)
        except Exception:
            log.exception("task %s: storing its outcome failed", task_id)
            return False
        finally:
            run.storing = False
        if rec is not None:
            run.final = rec
            engine.runs.remember(rec)
            # the waiters first: a result never waits on a notifier (a slow or stuck one)
            engine.runs.end(task_id, run)
            await engine.status_changed(rec)
            await engine.ended(rec, size)
        return True

    async def _write(self, task_id: str, outcome: Outcome) -> TaskRecord | None:
        status, message, result, error = outcome
        # A late outcome after a cancel or expiry is a no-op (R-CANCEL-3).
        return await self.engine.transition(
            task_id,
            status,
            expected=NON_TERMINAL,
            status_message=message,
            result=result,
            error=error,
        )

    def keep(self, task_id: str, run: Run, outcome: Outcome) -> None:
        """The store did not take ``outcome``: keep it for the settler."""
        run.kept = outcome
        run.attempts = 1
        run.retry_at = time.monotonic() + self.engine.config.retry_delay_s(1)
        self.kept[task_id] = run
        log.warning(
            "task %s: the store did not take its outcome (%s); it is kept and written again"
            " until the store takes it",
            task_id,
            outcome[0].value,
        )
        self.wake()

    def wake(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def _gone_past_keeping(self, run: Run) -> bool:
        """Whether the kept outcome's task can no longer be kept: its ttl ended (renewals
        on: its maximum ttl from creation; off: its ttl)."""
        now = self.engine.clock()
        if self.engine.renewals.on:
            if run.ttl_ms is None:
                return False
            return now >= run.created_at + self.engine.config.max_ttl_ms / 1000.0
        return run.expires_at is not None and run.expires_at <= now

    async def retry_due(self) -> None:
        """Write again every kept outcome whose time came (the settler, and every sweep)."""
        now = time.monotonic()
        due = [(t, r) for t, r in self.kept.items() if r.retry_at <= now and not r.storing]
        if not due:
            return
        async with anyio.create_task_group() as tg:  # concurrent: one pipeline, one commit
            for task_id, run in due:
                tg.start_soon(self._retry, task_id, run)

    async def _retry(self, task_id: str, run: Run) -> None:
        if self.kept.get(task_id) is not run or run.kept is None:
            return
        _, message, result, error = outcome = run.kept
        if self._gone_past_keeping(run):
            log.warning("task %s: its ttl ended before the store took its outcome", task_id)
        elif await self.store(task_id, run, outcome, outcome_size(result, error, message)):
            if run.final is not None:
                log.warning(
                    "task %s: its kept outcome is stored (write %d)", task_id, run.attempts + 1
                )
            else:  # ended elsewhere meanwhile (a cancel), or the store lost it
                log.warning("task %s: its kept outcome has no task to go to any more", task_id)
        else:
            run.attempts += 1
            run.retry_at = time.monotonic() + self.engine.config.retry_delay_s(run.attempts)
            return
        self.kept.pop(task_id, None)
        run.kept = None
        self.engine.runs.end(task_id, run)

    def _next_wait(self) -> float:
        if not self.kept:
            return math.inf
        soonest = min(r.retry_at for r in self.kept.values())
        return max(0.0, soonest - time.monotonic())

    async def serve(self) -> None:
        """Write the kept outcomes again as their times come (in the engine's task group)."""
        while True:
            self._wake = wake = anyio.Event()
            with anyio.move_on_after(self._next_wait()):
                await wake.wait()
            await self.retry_due()

    def left(self) -> list[str]:
        """The tasks whose outcome is still kept (logged when the engine stops)."""
        return list(self.kept)
