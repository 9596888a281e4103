"""The run supervisor: the one owner of the life of task work in this process.

It starts a task's work (or adopts one stored elsewhere, or hands one to another executor),
carries its input hand-over and progress, writes its outcome (and writes it again after a
store blink: ``outcomes.py``), renews its ttl while it runs (``renewals.py``), wakes its
waiters, and keeps the records of tasks that ended here a moment ago. No other module makes,
registers or ends a run; others see the runs through a read-only mapping (``active``) and
the calls below.

Built from narrow parts passed in: the store writer (its guard, coordination and clock), the
events sink and the config; never the engine. Waiters are woken as soon as an outcome is
stored; the status change then goes to the events sink (observers at once, notifications
queued: ``events.py``), and the end hooks (the engine's retention) run last.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import Any, TypeVar

import anyio
import anyio.abc

from ...errors import InternalError, StoreUnavailable, TaskError
from ...protocol import FAILED, INPUT_REQUIRED, NON_TERMINAL, TERMINAL, WORKING, TaskStatus
from ...store import TaskRecord, UnstorableValue
from ..logs import logger
from .config import EngineConfig
from .events import EngineEvents
from .executor import HandedWork
from .limits import outcome_size
from .outcomes import Doubts, Settler, unstorable
from .progress import ProgressNotes
from .renewals import Renewals
from .runs import (
    IsErrorResult,
    Outcome,
    PendingInput,
    Run,
    RunTtl,
    TaskContext,
    Work,
    bounded,
    interrupted,
    outcome_of,
)
from .store_writer import StoreWriter

__all__ = ["RECENT_MAX", "RECENT_S", "RunSupervisor"]

T = TypeVar("T")
log = logger("runtime")

#: How long (seconds) and how many of the records that work stored as it ended its task
#: are kept to answer lookups without the store (``RunSupervisor.recent``).
RECENT_S = 1.0
RECENT_MAX = 256


class RunSupervisor:
    """The runs of this engine by task ID, and their whole life (see the module)."""

    def __init__(self, writer: StoreWriter, events: EngineEvents, config: EngineConfig) -> None:
        self.writer = writer
        self.events = events
        self.config = config
        self._active: dict[str, Run] = {}
        #: the runs by task ID, read-only (coordination, the shutdown's drain)
        self.active: Mapping[str, Run] = MappingProxyType(self._active)
        #: task ID -> (kept until, monotonic; the record its outcome stored), oldest first
        self._recent: dict[str, tuple[float, TaskRecord]] = {}
        self._tg: anyio.abc.TaskGroup | None = None
        self.renewals = Renewals(writer, config)
        #: outcomes the store did not take yet, written again
        self.settler = Settler(config, self.store_outcome, self.end, self._past_keeping)
        #: creations the store answered with a failure, which may exist
        self.doubts = Doubts(writer, events, config)
        #: a running task's progress shown as its statusMessage, throttled
        self.progress = ProgressNotes(
            config.progress_message_interval_s, self.running_here, self.set_message, self.group
        )

    # ------------------------------------------------------------------ lifecycle
    def open(self, tg: anyio.abc.TaskGroup) -> None:
        """Run work in ``tg`` from now on (the engine's group)."""
        self._tg = tg
        tg.start_soon(self.settler.serve)

    def close(self) -> None:
        self._tg = None
        for task_id in self.settler.left():
            # Not lost for good: a durable store's recovery (or, on a shared store, the
            # lease this instance leaves behind) marks the task failed.
            log.error("task %s: the engine stopped before the store took its outcome", task_id)

    def group(self) -> anyio.abc.TaskGroup | None:
        return self._tg

    async def sweep(self, now: float) -> None:
        """Every sweep: kept outcomes and creations in doubt looked at, ttls renewed."""
        await self.settler.retry_due()
        await self.doubts.settle()
        if self.renewals.on:
            await self.renewals.renew_due([(t, r.ttl) for t, r in self._active.items()], now)

    # ------------------------------------------------------------------ what runs here
    def __len__(self) -> int:
        return len(self._active)

    def get(self, task_id: str) -> Run | None:
        return self._active.get(task_id)

    def running_here(self, task_id: str) -> bool:
        return task_id in self._active

    def counts(self) -> tuple[int, int]:
        """How many runs' work runs here: (working, waiting for input)."""
        working = waiting = 0
        for run in list(self._active.values()):
            if run.busy:
                if run.waiting:
                    waiting += 1
                else:
                    working += 1
        return working, waiting

    # ------------------------------------------------------------------ recent records
    def recent(self, task_id: str) -> TaskRecord | None:
        """The record the work of ``task_id`` stored as it ended the task here (or a
        terminal record of it read from the store, ``remember``), if that was less than
        ``RECENT_S`` ago: a ``tasks/result`` or ``tasks/get`` right after the end
        needs no read. Terminal records do not change (R-STATE-3); expiry is the caller's
        check, and an expired or deleted task is forgotten here (``forget``)."""
        got = self._recent.get(task_id)
        if got is None:
            return None
        if got[0] < time.monotonic():
            self._prune()
            return None
        return got[1]

    def ended(self, task_id: str) -> bool:
        """Whether the work of ``task_id`` ended its task here a moment ago (``recent``): a
        ``tasks/result`` of it is answered from the record at hand, waiting for nothing."""
        rec = self.recent(task_id)
        return rec is not None and rec.status in TERMINAL

    def forget(self, task_id: str) -> None:
        self._recent.pop(task_id, None)

    def remember(self, rec: TaskRecord | None) -> None:
        """A record just read from the store, kept as ``recent`` keeps those stored here
        when it is terminal: a task polled after its end costs one read per ``RECENT_S``,
        not one per poll. Terminal records do not change (R-STATE-3); a delete made by
        another instance is seen here at most ``RECENT_S`` late, as for the records stored
        here."""
        if rec is not None and rec.status in TERMINAL:
            self._remember(rec)

    def _remember(self, rec: TaskRecord) -> None:
        recent = self._recent
        if len(recent) >= RECENT_MAX:
            self._prune()
            if len(recent) >= RECENT_MAX:
                del recent[next(iter(recent))]
        recent[rec.task_id] = (time.monotonic() + RECENT_S, rec)

    def _prune(self) -> None:
        recent, now = self._recent, time.monotonic()
        while recent:
            key = next(iter(recent))
            if recent[key][0] >= now:
                return
            del recent[key]

    # ------------------------------------------------------------------ starting
    def register(
        self, task_id: str, requestor: str, tool_error: TaskStatus, created_at: float,
        ttl_ms: int | None,
    ) -> Run:  # fmt: skip
        """A run for a task being created (before its creation is written: a change event
        of it finds the run); ``discard`` it when the creation fails."""
        run = Run(requestor, tool_error, created_at=created_at, ttl_ms=ttl_ms)
        self._active[task_id] = run
        return run

    def discard(self, task_id: str) -> None:
        self._active.pop(task_id, None)

    def start(
        self,
        rec: TaskRecord,
        run: Run,
        work: Work,
        is_error_result: IsErrorResult | None,
        progress_token: str | int | None,
    ) -> None:
        """Start the work of the stored task ``rec`` (its ``run`` registered)."""
        tg = self._tg
        if tg is None:
            raise InternalError(detail="the task engine is not running (use `async with engine`)")
        task_id = rec.task_id
        tc = TaskContext(self, task_id, rec.requestor, progress_token)
        run.started = True
        # named: anyio makes no name of the callable for every task
        tg.start_soon(self._run, task_id, run, tc, work, is_error_result, name="mcp-tasks run")
        self.writer.coordination.started(tg, task_id, run)
        if self.renewals.urgent(run.ttl):
            tg.start_soon(self._renew_now, task_id, run, name="mcp-tasks run: ttl renewal")

    async def _renew_now(self, task_id: str, run: Run) -> None:
        if not run.busy:  # its work returned already: kept until createdAt + ttl, as asked
            return
        try:
            await self.renewals.renew(task_id, run.ttl, self.writer.clock())
        except TaskError:
            pass  # the store is unavailable: the next sweep tries again

    async def adopt(
        self,
        rec: TaskRecord,
        work: Work,
        *,
        tool_error: TaskStatus,
        progress_token: str | int | None = None,
    ) -> TaskRecord | None:
        """Run ``work`` for a task stored elsewhere (a worker running a front end's task)
        as ``start`` runs its own: the same context (progress, input requests through the
        store, cancellation from any instance) and its outcome stored only while the task
        is not terminal (a late or second outcome is a no-op). Returns once the work ended:
        the record its outcome stored, or None when it stored none (ended elsewhere).

        The caller cancelled (a worker stopping), the work is stopped and no outcome is
        stored: the task is left as it is for whoever runs it next."""
        if rec.task_id in self._active:
            raise InternalError(detail=f"task {rec.task_id} already runs here")
        run = Run(rec.requestor, tool_error)
        self._active[rec.task_id] = run
        self.start(rec, run, work, None, progress_token)
        try:
            while self._active.get(rec.task_id) is run:
                await run.changed.wait()
        except anyio.get_cancelled_exc_class():
            run.cancel()  # no outcome when the work still runs: the run ends storing none
            raise
        return run.final

    async def leave(self, grace_s: float) -> None:
        """Stop the work running here without storing an outcome (a worker leaving its
        jobs to others); wait up to ``grace_s`` for it to stop."""
        with anyio.move_on_after(grace_s):
            for task_id, run in list(self._active.items()):
                run.cancel()
                while self._active.get(task_id) is run:
                    await run.changed.wait()

    async def hand_over(
        self,
        handed: HandedWork,
        rec: TaskRecord,
        tool_error: TaskStatus,
        progress_token: str | int | None,
    ) -> None:
        """Give a stored task's work to its executor; a task it cannot take fails."""
        try:
            await handed.hand_over(rec, tool_error, progress_token)
        except Exception as exc:
            log.warning("task %s: its executor could not take it", rec.task_id, exc_info=True)
            err = InternalError(detail=f"the task could not be handed to workers ({exc})")
            new = await self.writer.transition(
                rec.task_id, FAILED, expected=NON_TERMINAL,
                status_message=err.message, error=err.to_error(),
            )  # fmt: skip
            if new is not None:
                self.events.status(new)
            raise err from None

    # ------------------------------------------------------------------ the outcome
    async def _run(
        self,
        task_id: str,
        run: Run,
        tc: TaskContext,
        work: Work,
        is_error_result: IsErrorResult | None,
    ) -> None:
        outcome: Outcome | None = None
        scope = run.scope  # the run's one scope: the work's, then its outcome's store
        with scope:
            try:
                outcome = await outcome_of(work, tc, is_error_result, run.tool_error)
            finally:
                # From here on a cancel of the run (``Run.cancel``) leaves the scope alone.
                run.busy = False
                if run.stopped:
                    outcome = None  # stopped under the work: no outcome of it is stored
                elif outcome is None:
                    outcome = interrupted()  # the engine shut down under the work
                if outcome is None:
                    self.end(task_id, run)
                else:
                    scope.shield = True  # the engine's exit does not interrupt the store
                    outcome, size = bounded(task_id, outcome, self.config.max_result_bytes)
                    if await self.store_outcome(task_id, run, outcome, size, later=True):
                        self.end(task_id, run)
                    else:
                        self.settler.keep(task_id, run, outcome)  # the run stays until stored
        # The status notifications last, in this task (no sender's wake-up), outside the
        # shield: the engine's exit cancels a notifier that blocks.
        if self.events.pending():
            await self.events.drain()

    async def store_outcome(
        self, task_id: str, run: Run, outcome: Outcome, size: int, later: bool = False
    ) -> bool:
        """One write of ``outcome`` (``size`` bytes of result and error, for the byte cap);
        True once settled (stored, or nothing is left to store: the task already ended
        elsewhere or is gone), False when the store did not take it. ``later``: the caller
        drains the status notifications itself (``events.py``)."""
        kept = run.kept
        if kept is not None:
            kept.storing = True
        try:
            await self.renewals.before_outcome(task_id, run.ttl, self.writer.clock())
            try:
                rec = await self._write(task_id, outcome)
            except UnstorableValue as exc:
                log.error("task %s: its outcome cannot be stored: %s", task_id, exc.reason)
                outcome = unstorable(exc)
                if kept is not None:
                    kept.outcome = outcome
                size = outcome_size(outcome[2], outcome[3], outcome[1])
                rec = await self._write(task_id, outcome)
        except TaskError:
            return False  # the store's own log says why (once per outage)
        except Exception:
            log.exception("task %s: storing its outcome failed", task_id)
            return False
        finally:
            if kept is not None:
                kept.storing = False
        if rec is not None:
            run.final = rec
            self._remember(rec)
            # the waiters first: a result never waits on a notifier (a slow or stuck one)
            self.end(task_id, run)
            self.events.status(rec, later=later)
            await self.events.ended(rec, size)
        return True

    async def _write(self, task_id: str, outcome: Outcome) -> TaskRecord | None:
        status, message, result, error = outcome
        # A late outcome after a cancel or expiry is a no-op (R-CANCEL-3).
        return await self.writer.transition(
            task_id,
            status,
            expected=NON_TERMINAL,
            status_message=message,
            result=result,
            error=error,
        )

    def end(self, task_id: str, run: Run) -> None:
        """The run is over (its outcome stored, or nothing left to store): it leaves the
        active runs and wakes its waiters."""
        if self._active.get(task_id) is run:
            del self._active[task_id]
        run.signal()

    def stop(self, task_id: str, *, forget: bool = False) -> None:
        """Stop the work of a task ended elsewhere (cancel, expiry): R-CANCEL-2."""
        run = self._active.pop(task_id, None) if forget else self._active.get(task_id)
        if run is not None:
            run.stop()

    def _past_keeping(self, ttl: RunTtl) -> bool:
        return self.renewals.past_keeping(ttl, self.writer.clock())

    async def before_end(self, task_id: str) -> None:
        """A task whose work runs here ends otherwise (a cancel): its ttl, renewed under
        its work, counts from this end now. Raises ``TaskError``."""
        run = self._active.get(task_id)
        if run is not None:
            await self.renewals.before_outcome(task_id, run.ttl, self.writer.clock())

    async def keep_alive(self, rec: TaskRecord, now: float) -> TaskRecord | None:
        """``rec`` read past its expiry: the record to answer when its work runs here (its
        ttl renewed: not expired, ``EngineConfig.keep_running_tasks``), else None."""
        run = self._active.get(rec.task_id)
        if run is None or rec.status in TERMINAL or not self.renewals.on:
            return None
        renewed = await self.renewals.renew(rec.task_id, run.ttl, now)
        if renewed is not None:
            return renewed
        expires = run.ttl.expires_at
        return rec if expires is not None and expires > now else None  # renewed since

    async def outcome_soon(self, task_id: str, within: float) -> bool:
        """Whether the work of ``task_id`` ended here, or returned and has its outcome's
        write land within ``within`` seconds (a kept outcome, which the store did not take,
        is not waited for): a ``tasks/result`` then needs nothing but the record. A cheap
        wait for a write that takes one store round trip, where watching the client would
        cost more than the write."""
        run = self._active.get(task_id)
        if run is not None and not run.busy and run.kept is None and run.final is None:
            with anyio.move_on_after(within):
                while run.final is None and run.kept is None and self._active.get(task_id) is run:
                    await run.changed.wait()
        return self.ended(task_id)

    async def stored_outcome(self, task_id: str, requestor: str) -> TaskRecord | None:
        """When the requestor's work of ``task_id`` returned here and its outcome is being
        stored (it asks for no input any more; or the store did not take it yet and it is
        kept), the record that write returns, without a read; None otherwise (or when the
        write did not end the task): read the store."""
        run = self._active.get(task_id)
        if run is None or run.busy or run.requestor != requestor:
            return None
        while run.final is None and self._active.get(task_id) is run:
            await run.changed.wait()  # the run's end signals it, after its outcome is stored
        return run.final

    # ------------------------------------------------------------------ the work's calls
    async def set_message(self, task_id: str, message: str) -> None:
        # A status message update without a move, tried in the task's likely status
        # first: no read before the write. A terminal task keeps its message. Best effort:
        # a store that blinks meanwhile loses the message, never the work.
        try:
            for status in (WORKING, INPUT_REQUIRED):
                if await self.writer.transition(
                    task_id, status, expected=(status,), status_message=message
                ):
                    break
        except TaskError as exc:
            log.info("task %s: status message not stored: %s", task_id, exc.message)
        run = self._active.get(task_id)
        if run is not None:
            run.signal()

    async def note_progress(self, task_id: str, text: str) -> None:
        await self.progress.note(task_id, text)

    async def _stubborn(self, call: Callable[[], Awaitable[T]]) -> T:
        """``call()``, a store call the work cannot go on without, made again with backoff
        while the store is unavailable (the task's cancel ends the wait)."""
        attempt = 0
        while True:
            try:
                return await call()
            except StoreUnavailable:
                attempt += 1
                await anyio.sleep(self.config.retry_delay_s(attempt))

    async def request_input(
        self, task_id: str, method: str, params: Mapping[str, Any]
    ) -> dict[str, Any]:
        run = self._active.get(task_id)
        if run is None:
            raise InternalError(detail="request_input outside a running task")
        inputs = run.inputs
        inputs.asked += 1
        pending = PendingInput(
            id=secrets.token_hex(8),  # the key, unique for the task's life
            task_id=task_id,
            method=method,
            params=dict(params),
            seq=inputs.asked,
        )
        inputs.add(pending)
        coord, clock = self.writer.coordination, self.writer.clock
        answered = False
        message = f"Waiting for the requestor to answer {method}"
        try:
            # Offered and marked input_required in one step (coordination.py).
            rec = await self._stubborn(lambda: coord.offer_input(run, pending, message, clock()))
            run.signal()
            if rec is not None:  # R-INPUT-1
                self.events.status(rec)
            await coord.wait_answer(run, pending)
            answered = True
        finally:
            inputs.drop(pending.id)
            with anyio.CancelScope(shield=True):
                if not answered:
                    await coord.withdraw_input(run, pending)
                if not inputs and not run.stopped:
                    # Back to working unless a request is outstanding, in one step.
                    try:
                        rec = await coord.resume(run, task_id, clock())
                    except TaskError as exc:  # the outcome's write moves it on anyway
                        log.info("task %s: still input_required: %s", task_id, exc.message)
                        rec = None
                    if rec is not None:  # R-INPUT-4
                        self.events.status(rec)
        if pending.error is not None:
            raise pending.error
        return pending.answer if pending.answer is not None else {}
