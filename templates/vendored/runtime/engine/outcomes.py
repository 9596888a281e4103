"""Outcomes kept until the store takes them, and creations in doubt.

**Kept outcomes.** A run's outcome is written once as its work returns (no extra store call
when that write succeeds). When the store does not take it (``StoreUnavailable``: Redis
unreachable, an SQLite file locked or busy), nothing is lost: the outcome is kept on its
``Run``, which stays among the supervisor's runs, so the task is ``working`` to readers (as the
store has it), keeps its active slot, and a ``tasks/result`` waiting here waits on that run
and gets the outcome the moment it is stored. The :class:`Settler` writes it again, first
after ``EngineConfig.outcome_retry_s``, then twice as long each time up to
``outcome_retry_max_s``, and every sweep looks too, until the store takes it, the task is
gone (another instance ended or expired it, or the store lost it: nothing to write), or the
task can no longer be kept (its ttl ended: ``renewals.py``). Only an outcome that is not JSON at
all (``UnstorableValue``) is replaced, by ``failed`` saying why.

**Creations in doubt.** A creation the store answered with a failure (``StoreUnavailable``)
may still have been written: Redis can run a script whose reply the connection then loses.
Such a task would be ``working`` with no work anywhere, its owner alive (no lease expires)
and its requestor told it was not created. Its ID is kept (at most ``DOUBTFUL_MAX``) and,
no sooner than ``outcome_retry_max_s`` after the failure (a write still in flight has landed
by then), every sweep moves it to ``failed`` with :data:`NOT_STARTED_MESSAGE` if it exists
and is not terminal (nothing changes when it was never written), until a store answers or
its ttl ends. So no task stays ``working`` without work here.

Both are the supervisor's parts (``supervisor.py``), built from narrow inputs: the
settler from the config and the supervisor's own store and end calls, the doubts from the
store writer, the events sink and the config.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable

import anyio

from ...errors import InternalError, TaskError
from ...protocol import FAILED, NON_TERMINAL
from ...store import UnstorableValue
from ..logs import logger
from .config import EngineConfig
from .events import EngineEvents
from .limits import outcome_size
from .runs import KeptOutcome, Outcome, Run, RunTtl
from .store_writer import StoreWriter

__all__ = ["DOUBTFUL_MAX", "NOT_STARTED_MESSAGE", "Doubts", "Settler", "unstorable"]

log = logger("runtime")

#: statusMessage of a task whose creation the store answered with a failure but wrote
NOT_STARTED_MESSAGE = "Task failed: it was not started (the task store failed as it was created)"
#: creations in doubt kept at most (the oldest is dropped, logged, beyond)
DOUBTFUL_MAX = 10_000

#: ``store(task_id, run, outcome, size)``: one write of an outcome; True once settled
StoreOutcome = Callable[[str, Run, Outcome, int], Awaitable[bool]]


def unstorable(exc: UnstorableValue) -> Outcome:
    """The outcome that replaces one no store can encode: ``failed``, saying why."""
    err = InternalError(detail=f"the task's result could not be stored: {exc.reason}")
    return (
        FAILED,
        f"Task failed: its result could not be stored: {exc.reason}",
        None,
        err.to_error(),
    )


class Doubts:
    """Creations the store answered with a failure, which may have been written."""

    def __init__(self, writer: StoreWriter, events: EngineEvents, config: EngineConfig) -> None:
        self.writer = writer
        self.events = events
        self.config = config
        #: task ID -> (when to look, when to give up)
        self.doubtful: dict[str, tuple[float, float | None]] = {}

    def doubt(self, task_id: str, expires_at: float | None) -> None:
        """The store answered the creation of ``task_id`` with a failure: it may exist."""
        doubtful = self.doubtful
        if len(doubtful) >= DOUBTFUL_MAX:
            oldest = next(iter(doubtful))
            del doubtful[oldest]
            log.warning("task %s: too many creations in doubt; no longer looked at", oldest)
        look_at = time.monotonic() + self.config.outcome_retry_max_s
        doubtful[task_id] = (look_at, expires_at)

    async def settle(self) -> None:
        """Every sweep: fail the creations in doubt that were written after all."""
        now = time.monotonic()
        due = [tid for tid, (look_at, _) in self.doubtful.items() if look_at <= now]
        if not due:
            return
        err = InternalError(message=NOT_STARTED_MESSAGE).to_error()

        async def settle(task_id: str) -> None:
            expires_at = self.doubtful[task_id][1]
            try:
                rec = await self.writer.transition(
                    task_id,
                    FAILED,
                    expected=NON_TERMINAL,
                    status_message=NOT_STARTED_MESSAGE,
                    error=err,
                )
            except TaskError:
                if expires_at is None or expires_at > self.writer.clock():
                    return  # the store is still unavailable: the next sweep looks again
                rec = None
            self.doubtful.pop(task_id, None)
            if rec is not None:
                log.warning("task %s: created though the store said not; failed", task_id)
                self.events.status(rec)

        async with anyio.create_task_group() as tg:  # concurrent: one pipeline, one commit
            for task_id in due:
                tg.start_soon(settle, task_id)


class Settler:
    """The outcomes the store did not take yet, by task ID, written again with backoff
    through ``store`` (the supervisor's write); ``end`` ends a run whose outcome is settled
    or can no longer be; ``past_keeping(ttl)`` says when a task can no longer be kept."""

    def __init__(
        self,
        config: EngineConfig,
        store: StoreOutcome,
        end: Callable[[str, Run], None],
        past_keeping: Callable[[RunTtl], bool],
    ) -> None:
        self.config = config
        self._store = store
        self._end = end
        self._past_keeping = past_keeping
        self.kept: dict[str, Run] = {}
        self._wake: anyio.Event | None = None

    def __len__(self) -> int:
        return len(self.kept)

    def keep(self, task_id: str, run: Run, outcome: Outcome) -> None:
        """The store did not take ``outcome``: keep it for the settler."""
        run.kept = KeptOutcome(outcome, time.monotonic() + self.config.retry_delay_s(1))
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

    async def retry_due(self) -> None:
        """Write again every kept outcome whose time came (the settler, and every sweep)."""
        now = time.monotonic()
        due = [
            (t, r)
            for t, r in self.kept.items()
            if r.kept is not None and r.kept.retry_at <= now and not r.kept.storing
        ]
        if not due:
            return
        async with anyio.create_task_group() as tg:  # concurrent: one pipeline, one commit
            for task_id, run in due:
                tg.start_soon(self._retry, task_id, run)

    async def _retry(self, task_id: str, run: Run) -> None:
        kept = run.kept
        if self.kept.get(task_id) is not run or kept is None:
            return
        _, message, result, error = outcome = kept.outcome
        if self._past_keeping(run.ttl):
            log.warning("task %s: its ttl ended before the store took its outcome", task_id)
        elif await self._store(task_id, run, outcome, outcome_size(result, error, message)):
            if run.final is not None:
                log.warning(
                    "task %s: its kept outcome is stored (write %d)", task_id, kept.attempts + 1
                )
            else:  # ended elsewhere meanwhile (a cancel), or the store lost it
                log.warning("task %s: its kept outcome has no task to go to any more", task_id)
        else:
            kept.attempts += 1
            kept.retry_at = time.monotonic() + self.config.retry_delay_s(kept.attempts)
            return
        self.kept.pop(task_id, None)
        run.kept = None
        self._end(task_id, run)

    def _next_wait(self) -> float:
        times = [r.kept.retry_at for r in self.kept.values() if r.kept is not None]
        if not times:
            return math.inf
        return max(0.0, min(times) - time.monotonic())

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
