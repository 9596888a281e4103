"""Coordination: how an engine learns about changes it did not make, chosen once from
the store's type.

- ``LocalCoordination`` (a plain ``TaskStore``: this process alone changes its tasks, or
  other processes only read them): runs signal in-process events; input requests stay
  in memory; a task not running here is polled at its ``pollInterval``. A store with
  ``external_changes`` (SQLite: ``mcptask admin cancel`` writes the file) has the tasks
  whose work runs here read back on every sweep, and the work of those that ended in the
  store stopped.
- ``SharedCoordination`` (a ``SharedTaskStore``, e.g. Redis): change events come from
  the store (with a bounded fallback poll); input requests and answers go through the
  store, so any instance's ``tasks/result`` delivers them; tasks of an instance whose
  lease expired are failed on every sweep; cursors are signed with the store's secret.
"""

from __future__ import annotations

import abc
import secrets
from collections.abc import Mapping
from typing import Any, cast

import anyio
import anyio.abc

from ...errors import StoreUnavailable, TaskError, error_from_payload
from ...protocol import INPUT_REQUIRED, TERMINAL, WORKING
from ...store import SharedTaskStore, TaskRecord, TaskStore, TaskWatch
from ..logs import logger
from .config import EngineConfig
from .cursor import CursorCodec
from .guard import SharedStoreGuard, StoreGuard
from .runs import InputRequest, PendingInput, Run, request_of

#: An input request's answer from a face, as the work gets it (a bare result object).
Answers = Mapping[str, Mapping[str, Any]]

log = logger("runtime")

#: statusMessage and error of tasks whose instance stopped renewing its lease (shared stores).
LEASE_EXPIRED_MESSAGE = (
    "Task failed: the server instance running it stopped responding (its lease expired)"
)


class Waiter(abc.ABC):
    """One ``tasks/result`` call's view of its task: change signals and input requests."""

    def __enter__(self) -> Waiter:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def arm(self) -> None:
        """Called before each read of the task: a change after it wakes ``wait``."""
        return None

    def final(self) -> TaskRecord | None:
        """The record the task's work stored when it ended the task in this process since
        the last ``arm`` (terminal: nothing changes it after), else None (read the store)."""
        return None

    @abc.abstractmethod
    async def pending(self, rec: TaskRecord) -> list[PendingInput]:
        """Input requests this call should deliver now (claimed for it)."""

    @abc.abstractmethod
    async def wait(self, rec: TaskRecord) -> None:
        """Until the task may have changed."""

    @abc.abstractmethod
    async def answer(
        self, p: PendingInput, answer: dict[str, Any] | None, error: TaskError | None
    ) -> bool:
        """Hand an answer to the work; False when it could not be handed over."""

    @abc.abstractmethod
    async def release(self, p: PendingInput) -> None:
        """Give up delivering ``p`` (another call may deliver it)."""


class Coordination(abc.ABC):
    """The strategy an engine uses for everything that differs between plain and shared
    stores."""

    guard: StoreGuard

    def __init__(self, config: EngineConfig, runs: Mapping[str, Run]) -> None:
        self.config = config
        #: the runs of this engine by task ID, read-only (the supervisor's)
        self.runs = runs

    @abc.abstractmethod
    async def cursor_codec(self) -> CursorCodec:
        """The codec that signs and verifies ``tasks/list`` cursors now."""

    @abc.abstractmethod
    async def recover_at_start(self, now: float, message: str) -> list[TaskRecord]:
        """Tasks a dead process left running, now failed."""

    async def recover_on_sweep(self, now: float) -> list[TaskRecord]:
        """Tasks failed on a sweep (instances whose lease expired). Plain stores: none."""
        return []

    def started(self, tg: anyio.abc.TaskGroup, task_id: str, run: Run) -> None:
        """Work of ``task_id`` started here."""
        return None

    @abc.abstractmethod
    def waiter(self, task_id: str, requestor: str) -> Waiter:
        """A ``tasks/result`` call's view of its task."""

    # The input steps: each is one step no other can interleave with, so that a task is
    # never ``working`` while an input request of its work is outstanding (R-INPUT-1,
    # R-INPUT-4), and each returns the task's new record when its status moved.

    @abc.abstractmethod
    async def offer_input(
        self, run: Run, pending: PendingInput, message: str, now: float
    ) -> TaskRecord | None:
        """Make an input request of running work (in ``run.inputs``) deliverable and move a
        ``working`` task to ``input_required`` with ``message``, in one step."""

    @abc.abstractmethod
    async def resume(self, run: Run, task_id: str, now: float) -> TaskRecord | None:
        """The work stopped waiting for input: ``input_required`` -> ``working`` unless a
        request is outstanding, in one step."""

    @abc.abstractmethod
    async def wait_answer(self, run: Run, pending: PendingInput) -> None:
        """Until ``pending`` has its ``answer`` or ``error``."""

    async def withdraw_input(self, run: Run, pending: PendingInput) -> None:
        """The work stopped waiting for ``pending`` unanswered."""
        return None

    @abc.abstractmethod
    async def inputs(self, task_id: str, requestor: str) -> list[InputRequest]:
        """The task's outstanding input requests, oldest first."""

    @abc.abstractmethod
    async def answer_inputs(
        self, task_id: str, requestor: str, answers: Answers, now: float
    ) -> tuple[set[str], TaskRecord | None]:
        """Hand the answers under outstanding keys to the work (the other keys are ignored,
        their values never read), remove those keys from ``inputs`` at once and, when none
        is left outstanding, move the task from ``input_required`` to ``working``, in one
        step; returns the keys taken and the new record when the task moved."""


def choose(store: TaskStore, config: EngineConfig, runs: Mapping[str, Run]) -> Coordination:
    """The coordination a store needs: shared for a ``SharedTaskStore``, else local.

    A store that only sets ``shared = True`` (written before ``SharedTaskStore`` existed,
    with the same methods) is coordinated as shared too."""
    if isinstance(store, SharedTaskStore):
        return SharedCoordination(store, config, runs)
    if store.shared:
        return SharedCoordination(cast(SharedTaskStore, store), config, runs)
    return LocalCoordination(store, config, runs)


# ---------------------------------------------------------------------- local


class LocalCoordination(Coordination):
    def __init__(self, store: TaskStore, config: EngineConfig, runs: Mapping[str, Run]) -> None:
        super().__init__(config, runs)
        self.guard = StoreGuard(store)
        self._codec = CursorCodec(config.secret_bytes)

    async def cursor_codec(self) -> CursorCodec:
        return self._codec

    async def recover_at_start(self, now: float, message: str) -> list[TaskRecord]:
        return await self.guard.recover(now, message)

    async def recover_on_sweep(self, now: float) -> list[TaskRecord]:
        """Tasks whose work runs here but that another process ended in the store (an
        operator's cancel): their work is stopped, and their records returned (the engine
        tells its listeners, as it would of its own change). One read per running task."""
        if not self.guard.store.external_changes:
            return []
        ended: list[TaskRecord] = []
        for task_id, run in list(self.runs.items()):
            if not run.busy or not run.started:  # ended, or its creation not yet written
                continue
            rec = await self.guard.get(task_id)
            if self.runs.get(task_id) is not run or not run.busy:
                continue  # it ended here meanwhile (its own outcome)
            if rec is None or rec.status in TERMINAL:
                run.stop()
                if rec is not None:
                    ended.append(rec)
        return ended

    def waiter(self, task_id: str, requestor: str) -> Waiter:
        return _LocalWaiter(self.runs, task_id)

    async def wait_answer(self, run: Run, pending: PendingInput) -> None:
        await pending.answered.wait()

    # The input steps hold the run's ``step`` lock across their status write: the work's
    # requests and the answers' resumes of one task are serialised.

    async def offer_input(
        self, run: Run, pending: PendingInput, message: str, now: float
    ) -> TaskRecord | None:
        async with run.inputs.step:
            return await self.guard.transition(
                pending.task_id, INPUT_REQUIRED, now=now, expected=(WORKING,),
                status_message=message,
            )  # fmt: skip

    async def resume(self, run: Run, task_id: str, now: float) -> TaskRecord | None:
        async with run.inputs.step:
            if run.inputs.outstanding():
                return None
            return await self.guard.transition(
                task_id, WORKING, now=now, expected=(INPUT_REQUIRED,)
            )

    async def inputs(self, task_id: str, requestor: str) -> list[InputRequest]:
        run = self.runs.get(task_id)
        if run is None:
            return []
        return run.inputs.requests()

    async def answer_inputs(
        self, task_id: str, requestor: str, answers: Answers, now: float
    ) -> tuple[set[str], TaskRecord | None]:
        run = self.runs.get(task_id)
        if run is None:
            return set(), None
        async with run.inputs.step:
            taken = run.inputs.take(answers)
            new = None
            if taken and not run.inputs.outstanding():
                new = await self.guard.transition(
                    task_id, WORKING, now=now, expected=(INPUT_REQUIRED,)
                )
        if taken:
            run.signal()
        return taken, new


def stored_inputs(task_id: str, items: list[dict[str, Any]]) -> list[InputRequest]:
    """A shared store's input items of a task (``pending_inputs``) as requests, oldest
    first (the engine's, and ``mcptask admin show`` reading the store)."""
    pending = sorted((pending_of(task_id, i) for i in items), key=lambda p: p.seq)
    return [request_of(p) for p in pending]


def pending_of(task_id: str, item: Mapping[str, Any]) -> PendingInput:
    """A shared store's input item (``{"id", "method", "params", "seq"}``) as a ``PendingInput``."""
    params, seq = item.get("params"), item.get("seq")
    return PendingInput(
        id=str(item.get("id")),
        task_id=task_id,
        method=str(item.get("method")),
        params=dict(params) if isinstance(params, dict) else {},
        seq=seq if isinstance(seq, int) else 0,
    )


class _LocalWaiter(Waiter):
    __slots__ = ("_event", "_run", "runs", "task_id")

    def __init__(self, runs: Mapping[str, Run], task_id: str) -> None:
        self.runs = runs
        self.task_id = task_id
        self._run: Run | None = None
        self._event: anyio.Event | None = None

    def arm(self) -> None:
        run = self._run = self.runs.get(self.task_id)
        self._event = run.changed if run is not None else None

    def final(self) -> TaskRecord | None:
        run = self._run
        return None if run is None else run.final

    async def pending(self, rec: TaskRecord) -> list[PendingInput]:
        run = self._run
        return [] if run is None else run.inputs.claim()

    async def wait(self, rec: TaskRecord) -> None:
        if self._event is None:
            # Not running here (another process owns it): poll the store.
            await anyio.sleep((rec.poll_interval_ms or 500) / 1000.0)
        else:
            await self._event.wait()

    async def answer(
        self, p: PendingInput, answer: dict[str, Any] | None, error: TaskError | None
    ) -> bool:
        p.answer, p.error = answer, error
        p.answered.set()
        return True

    async def release(self, p: PendingInput) -> None:
        p.claimed = False
        run = self.runs.get(self.task_id)
        if run is not None:
            run.signal()


# ---------------------------------------------------------------------- shared


class SharedCoordination(Coordination):
    guard: SharedStoreGuard

    def __init__(
        self, store: SharedTaskStore, config: EngineConfig, runs: Mapping[str, Run]
    ) -> None:
        super().__init__(config, runs)
        self.guard = SharedStoreGuard(store)
        configured = config.secret_bytes
        self._fixed = CursorCodec(configured) if configured is not None else None
        self._fallback = CursorCodec()
        self._secret: bytes | None = None
        self._codec = self._fallback

    async def cursor_codec(self) -> CursorCodec:
        """Asked on every sign and verify: a cursor issued by one instance verifies on
        every other one, and a secret that changed in the store is picked up."""
        if self._fixed is not None:
            return self._fixed
        secret = await self.guard.shared_secret()
        if secret is None:
            return self._fallback
        if secret != self._secret:
            self._secret, self._codec = secret, CursorCodec(secret)
        return self._codec

    async def recover_at_start(self, now: float, message: str) -> list[TaskRecord]:
        try:
            return await self.guard.recover(now, message)
        except TaskError:
            # The store may be down now: serve anyway (task calls answer "Task store
            # unavailable" until it is back); the sweeper reaps leases later.
            log.warning("task store unavailable at start", exc_info=True)
            return []

    async def recover_on_sweep(self, now: float) -> list[TaskRecord]:
        # Tasks of an instance whose lease expired (it died mid-task) become failed.
        return await self.guard.recover(now, LEASE_EXPIRED_MESSAGE)

    def started(self, tg: anyio.abc.TaskGroup, task_id: str, run: Run) -> None:
        tg.start_soon(self._monitor, task_id, run, name="mcp-tasks run: monitor")

    async def _monitor(self, task_id: str, run: Run) -> None:
        """Stop the work here when another instance ends the task (a cancel, an expiry,
        a lease reap): R-CANCEL-2 across instances. Any other change made elsewhere
        signals the run (its waiters here wait on it). Once the work returned there is
        nothing left to stop: the change events of its own outcome cost no read."""
        runs = self.runs
        if not run.busy:  # the work returned before this started (the common case)
            return
        with self.guard.watch(task_id) as watch:
            while runs.get(task_id) is run:
                await watch.wait(5 * self.config.watch_fallback_s)
                if runs.get(task_id) is not run or not run.busy:
                    return
                try:
                    rec = await self.guard.get(task_id)
                except TaskError:
                    continue  # store unavailable: keep working, look again later
                if rec is None or rec.status in TERMINAL:
                    run.stop()
                    return
                run.signal()

    def waiter(self, task_id: str, requestor: str) -> Waiter:
        return _SharedWaiter(self, task_id, requestor)

    async def offer_input(
        self, run: Run, pending: PendingInput, message: str, now: float
    ) -> TaskRecord | None:
        item = {
            "id": pending.id,
            "method": pending.method,
            "params": pending.params,
            "seq": pending.seq,
        }
        return await self.guard.offer_input(
            pending.task_id, run.requestor, item, now=now, status_message=message
        )

    async def resume(self, run: Run, task_id: str, now: float) -> TaskRecord | None:
        return await self.guard.resume(task_id, run.requestor, now=now)

    async def wait_answer(self, run: Run, pending: PendingInput) -> None:
        guard, task_id = self.guard, pending.task_id
        with guard.watch(task_id) as watch:
            while True:
                try:
                    got = await guard.take_answer(task_id, run.requestor, pending.id)
                except StoreUnavailable:
                    got = None  # the store blinks: an answer waits in it; look again
                if got is not None:
                    break
                await watch.wait(self.config.watch_fallback_s)
        error = got.get("error")
        if isinstance(error, dict):
            pending.error = error_from_payload(error)
        else:
            result = got.get("result")
            pending.answer = dict(result) if isinstance(result, dict) else {}

    async def withdraw_input(self, run: Run, pending: PendingInput) -> None:
        try:
            await self.guard.withdraw_input(pending.task_id, run.requestor, pending.id)
        except TaskError:
            log.warning("task %s: could not withdraw input %s", pending.task_id, pending.id)

    async def inputs(self, task_id: str, requestor: str) -> list[InputRequest]:
        return stored_inputs(task_id, await self.guard.pending_inputs(task_id, requestor))

    async def answer_inputs(
        self, task_id: str, requestor: str, answers: Answers, now: float
    ) -> tuple[set[str], TaskRecord | None]:
        guard = self.guard
        outstanding = {str(i.get("id")) for i in await guard.pending_inputs(task_id, requestor)}
        # Only the keys outstanding a moment ago are read; the store takes those still
        # outstanding and resumes the task in the same step.
        payloads = {key: {"result": dict(answers[key])} for key in answers.keys() & outstanding}
        if not payloads:
            return set(), None
        return await guard.answer_inputs(task_id, requestor, payloads, now=now)


class _SharedWaiter(Waiter):
    def __init__(self, coord: SharedCoordination, task_id: str, requestor: str) -> None:
        self.coord = coord
        self.task_id = task_id
        self.requestor = requestor
        self.claimer = secrets.token_hex(8)
        self._watch: TaskWatch | None = None
        self._run: Run | None = None
        self._event: anyio.Event | None = None

    def __enter__(self) -> Waiter:
        self._watch = self.coord.guard.watch(self.task_id).__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.__exit__(*exc)

    def arm(self) -> None:
        # The watch, entered first, wakes on any change. When the work runs in this
        # process its run is signalled on every change instead (its own, and those the
        # monitor sees), sooner than the change event, and hands over the record its
        # outcome stored.
        run = self._run = self.coord.runs.get(self.task_id)
        self._event = run.changed if run is not None else None

    def final(self) -> TaskRecord | None:
        run = self._run
        return None if run is None else run.final

    async def pending(self, rec: TaskRecord) -> list[PendingInput]:
        if rec.status != INPUT_REQUIRED:
            return []
        # Claiming again renews the claims this call is delivering.
        items = await self.coord.guard.claim_inputs(
            self.task_id, self.requestor, self.claimer, self.coord.config.input_claim_s
        )
        return sorted((pending_of(self.task_id, i) for i in items), key=lambda p: p.seq)

    async def wait(self, rec: TaskRecord) -> None:
        assert self._watch is not None
        if self._event is None:
            await self._watch.wait(self.coord.config.watch_fallback_s)
        else:
            with anyio.move_on_after(self.coord.config.watch_fallback_s):
                await self._event.wait()

    async def answer(
        self, p: PendingInput, answer: dict[str, Any] | None, error: TaskError | None
    ) -> bool:
        payload = {"error": error.to_error()} if error is not None else {"result": answer or {}}
        try:
            await self.coord.guard.answer_input(self.task_id, self.requestor, p.id, payload)
        except TaskError:
            log.exception("task %s: could not store the answer to %s", self.task_id, p.id)
            return False
        return True

    async def release(self, p: PendingInput) -> None:
        try:
            await self.coord.guard.release_input(self.task_id, self.requestor, p.id, self.claimer)
        except TaskError:
            pass  # the claim lapses by itself
