"""Running work: what a task's work gets (``TaskContext``), its run in the engine's task
group, input requests it makes (R-INPUT-*), and ``tasks/result`` waiting for the end.

How runs learn about changes made elsewhere (another process, a shared store) is the
coordination strategy's part (``coordination.py``); this module is the same for both.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, overload

import anyio
import anyio.abc

from ..errors import InternalError, StoreUnavailable, TaskError
from ..protocol import (
    COMPLETED,
    FAILED,
    INPUT_REQUIRED,
    TERMINAL,
    WORKING,
    TaskStatus,
)
from ..store import TaskRecord
from .limits import bounded_outcome, outcome_size
from .progress import progress_text

if TYPE_CHECKING:
    from .coordination import Waiter
    from .engine import TaskEngine

T = TypeVar("T")
Work = Callable[["TaskContext"], Awaitable[dict[str, Any]]]
InputHandler = Callable[["PendingInput"], Awaitable[dict[str, Any]]]
IsErrorResult = Callable[[dict[str, Any]], bool]
#: (status, statusMessage, result, error) a run ends with
Outcome = tuple[TaskStatus, str | None, dict[str, Any] | None, dict[str, Any] | None]

#: statusMessage and error of tasks interrupted by a process that died or shut down.
INTERRUPTED_MESSAGE = "Task failed: the server stopped before the task finished"


@dataclass(frozen=True, slots=True)
class InputRequest:
    """An outstanding request of a task's work, in no wire format: ``key`` is unique for
    the task's life; ``params`` are the work's own (no related-task ``_meta``)."""

    key: str
    task_id: str
    method: str
    params: dict[str, Any]


@dataclass(frozen=True, slots=True)
class TaskView:
    """A task and its outstanding input requests in creation order (empty unless the
    task is ``input_required``)."""

    record: TaskRecord
    inputs: tuple[InputRequest, ...] = ()


@dataclass(eq=False)
class PendingInput:
    """A request the work sends to its requestor (R-INPUT-*), as the engine keeps it.

    ``params`` are the work's own; a face stamps what its wire needs on delivery."""

    id: str
    task_id: str
    method: str
    params: dict[str, Any]
    #: creation order within the task
    seq: int = 0
    claimed: bool = field(default=False, repr=False)
    answered: anyio.Event = field(default_factory=anyio.Event, repr=False)
    answer: dict[str, Any] | None = field(default=None, repr=False)
    error: TaskError | None = field(default=None, repr=False)


class LazyEvent:
    """An ``anyio.Event`` attribute made on first use and kept in ``_<name>`` (None until
    then): most tasks end before anyone waits on them, and an ``anyio.Event`` costs a
    backend lookup (about 1% of a task's CPU)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = f"_{name}"

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> LazyEvent: ...

    @overload
    def __get__(self, obj: object, owner: type | None = None) -> anyio.Event: ...

    def __get__(self, obj: object, owner: type | None = None) -> anyio.Event | LazyEvent:
        if obj is None:
            return self
        ev: anyio.Event | None = getattr(obj, self.slot)
        if ev is None:
            ev = anyio.Event()
            setattr(obj, self.slot, ev)
        return ev


class Run:
    """A task running in this engine: its cancel scope, pending inputs, change signal; its
    ttl (renewed while it runs) and, once its work returned, the outcome the store did not
    take yet (``outcomes.py``)."""

    __slots__ = (
        "_changed", "_step", "asked", "attempts", "busy", "created_at", "expires_at", "final",
        "kept", "pending", "renewed", "requestor", "retry_at", "scope", "started", "storing",
        "tool_error", "ttl_lock", "ttl_ms",
    )  # fmt: skip

    def __init__(
        self,
        requestor: str,
        tool_error: TaskStatus = FAILED,
        *,
        created_at: float = 0.0,
        ttl_ms: int | None = None,
    ) -> None:
        self.requestor = requestor
        #: the task's creation and the ttl it was given (``ttl_ms`` None: unlimited)
        self.created_at = created_at
        self.ttl_ms = ttl_ms
        #: the task's expiry as this engine last stored it (renewals move it)
        self.expires_at = None if ttl_ms is None else created_at + ttl_ms / 1000.0
        self.renewed = False
        #: made by the first renewal: one ttl change at a time (``outcomes.Renewals``)
        self.ttl_lock: anyio.Lock | None = None
        #: the outcome the store did not take yet, its writes so far, the next one's time
        self.kept: Outcome | None = None
        self.attempts = 0
        self.retry_at = 0.0
        self.storing = False
        #: The record this run's own outcome stored (terminal: nothing changes it after),
        #: so a waiter it wakes needs no read of the store.
        self.final: TaskRecord | None = None
        #: True until the work returned or raised (then only its outcome is left to store).
        self.busy = True
        #: False while the task's creation is being written (the run is registered first):
        #: a sweep that finds no record then must not take the task for one ended elsewhere
        self.started = False
        #: the status a tool result with ``isError`` ends in (the face decides)
        self.tool_error = tool_error
        self.scope = anyio.CancelScope()
        self.pending: dict[str, PendingInput] = {}
        self.asked = 0  # input requests made so far (their ``seq``)
        self._changed: anyio.Event | None = None  # ``changed``, made on first use
        self._step: anyio.Lock | None = None  # ``step``, made on first use

    #: The event the next ``signal()`` sets.
    changed = LazyEvent()

    @property
    def step(self) -> anyio.Lock:
        """Serialises the work's input requests with the answers' resumes of its task (the
        local coordination's input steps); made when the work first asks for input."""
        lock = self._step
        if lock is None:
            lock = self._step = anyio.Lock(fast_acquire=True)
        return lock

    def signal(self) -> None:
        """Wake every waiter (each waits on the event it saw; a fresh one replaces it)."""
        ev, self._changed = self._changed, None
        if ev is not None:
            ev.set()

    def stop(self) -> None:
        """Cancel the work (its wait for input too) and wake its waiters."""
        self.scope.cancel()
        self.signal()


class TaskContext:
    """What a task's work gets: its identity, its status message, progress and input
    requests."""

    def __init__(
        self, engine: TaskEngine, task_id: str, requestor: str, progress_token: str | int | None
    ) -> None:
        self._engine = engine
        self.task_id = task_id
        self.requestor = requestor
        self.progress_token = progress_token

    async def set_status_message(self, message: str) -> None:
        await self._engine.runs.set_message(self.task_id, message)

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """The work's progress, shown as the task's ``statusMessage`` (throttled: at most one
        write per ``EngineConfig.progress_message_interval_s``, the latest report kept)."""
        await self._engine.progress.note(self.task_id, progress_text(progress, total, message))

    async def request_input(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """Ask the requestor (``elicitation/create``, ``sampling/createMessage``, ...) and wait.

        The task is ``input_required`` until every pending request is answered, then
        ``working`` again (R-INPUT-1, R-INPUT-4). Cancelling the task ends the wait.
        An error answer is raised here as a ``TaskError``."""
        return await self._engine.runs.request_input(self.task_id, method, params)


def error_text(result: Mapping[str, Any]) -> str:
    """A statusMessage for a failed tool result (R-STATE-4): its first text, else a summary."""
    content = result.get("content")
    if isinstance(content, list):
        for item in content:
            if isinstance(item, Mapping) and isinstance(item.get("text"), str):
                text: str = item["text"]
                return "Tool error: " + (text if len(text) <= 500 else text[:497] + "...")
    return "Tool error: the tool returned isError"


async def outcome_of(
    work: Work,
    tc: TaskContext,
    is_error_result: IsErrorResult | None,
    engine: TaskEngine,
    tool_error: TaskStatus = FAILED,
) -> Outcome:
    """Run the work and say how its task ends (R-STATE-4, R-RESULT-1); a tool result
    with ``isError`` ends in ``tool_error``."""
    try:
        result = await work(tc)
        if not isinstance(result, dict):
            raise InternalError(detail="the task's work returned a non-object result")
        if is_error_result is not None:
            failed = is_error_result(result)
        else:
            failed = result.get("isError") is True
        if failed:  # R-STATE-4: a tool result with isError
            return (tool_error, error_text(result), result, None)
        return (COMPLETED, None, result, None)
    except TaskError as exc:  # R-RESULT-1: the same JSON-RPC error
        return (FAILED, exc.message, None, exc.to_error())
    except Exception as exc:
        engine.log.exception("task %s: work raised", tc.task_id)
        err = InternalError(detail=f"{type(exc).__name__}: {exc}")
        return (FAILED, err.message, None, err.to_error())


def bounded(task_id: str, outcome: Outcome, engine: TaskEngine) -> tuple[Outcome, int]:
    """``outcome``, or the ``ResultTooLarge`` failure kept instead of a result or error over
    ``EngineConfig.max_result_bytes`` (R-SEC-4), and the bytes of result, error and
    statusMessage it keeps (measured once: the byte caps count them when it is stored)."""
    status, message, result, error = outcome
    size, too_large = bounded_outcome(result, error, engine.config.max_result_bytes, message)
    if too_large is None:
        return outcome, size
    engine.log.warning("task %s: %s", task_id, too_large.message)
    error = too_large.to_error()
    return (FAILED, too_large.message, None, error), outcome_size(None, error, too_large.message)


#: How long (seconds) and how many of the records that work stored as it ended its task
#: are kept to answer lookups without the store (``Runs.recent``).
RECENT_S = 1.0
RECENT_MAX = 256


class Runs:
    """The tasks whose work runs in this engine, by task ID, and the records of those that
    ended here a moment ago."""

    def __init__(self, engine: TaskEngine) -> None:
        self.engine = engine
        self.active: dict[str, Run] = {}
        #: task ID -> (kept until, monotonic; the record its outcome stored), oldest first
        self._recent: dict[str, tuple[float, TaskRecord]] = {}

    def recent(self, task_id: str) -> TaskRecord | None:
        """The record the work of ``task_id`` stored as it ended the task here, if that was
        less than ``RECENT_S`` ago: a ``tasks/result`` or ``tasks/get`` right after the end
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

    def remember(self, rec: TaskRecord) -> None:
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

    def __len__(self) -> int:
        return len(self.active)

    def get(self, task_id: str) -> Run | None:
        return self.active.get(task_id)

    def stop(self, task_id: str, *, forget: bool = False) -> None:
        """Stop the work of a task ended elsewhere (cancel, expiry): R-CANCEL-2."""
        run = self.active.pop(task_id, None) if forget else self.active.get(task_id)
        if run is not None:
            run.stop()

    def start(
        self,
        tg: anyio.abc.TaskGroup,
        rec: TaskRecord,
        run: Run,
        tc: TaskContext,
        work: Work,
        is_error_result: IsErrorResult | None,
    ) -> None:
        run.started = True
        tg.start_soon(self._run, rec.task_id, run, tc, work, is_error_result)
        self.engine.coordination.started(tg, rec.task_id, run)
        self.engine.renewals.started(tg, rec.task_id, run)

    async def _run(
        self,
        task_id: str,
        run: Run,
        tc: TaskContext,
        work: Work,
        is_error_result: IsErrorResult | None,
    ) -> None:
        outcome: Outcome | None = None
        try:
            with run.scope:
                outcome = await outcome_of(work, tc, is_error_result, self.engine, run.tool_error)
        finally:
            run.busy = False
            with anyio.CancelScope(shield=True):
                if outcome is None and not run.scope.cancel_called:
                    # The engine shut down under the work.
                    err = InternalError(message=INTERRUPTED_MESSAGE)
                    outcome = (FAILED, INTERRUPTED_MESSAGE, None, err.to_error())
                settler = self.engine.settler
                if outcome is None:
                    self.end(task_id, run)
                else:
                    outcome, size = bounded(task_id, outcome, self.engine)
                    if await settler.store(task_id, run, outcome, size):
                        self.end(task_id, run)
                    else:
                        settler.keep(task_id, run, outcome)  # the run stays until stored

    def end(self, task_id: str, run: Run) -> None:
        """The run is over (its outcome stored, or nothing left to store): it leaves the
        active runs and wakes its waiters."""
        if self.active.get(task_id) is run:
            del self.active[task_id]
        run.signal()

    async def set_message(self, task_id: str, message: str) -> None:
        # A status message update without a move, tried in the task's likely status
        # first: no read before the write. A terminal task keeps its message. Best effort:
        # a store that blinks meanwhile loses the message, never the work.
        engine = self.engine
        try:
            for status in (WORKING, INPUT_REQUIRED):
                if await engine.transition(
                    task_id, status, expected=(status,), status_message=message
                ):
                    break
        except TaskError as exc:
            engine.log.info("task %s: status message not stored: %s", task_id, exc.message)
        run = self.active.get(task_id)
        if run is not None:
            run.signal()

    async def _stubborn(self, call: Callable[[], Awaitable[T]]) -> T:
        """``call()``, a store call the work cannot go on without, made again with backoff
        while the store is unavailable (the task's cancel ends the wait)."""
        attempt = 0
        while True:
            try:
                return await call()
            except StoreUnavailable:
                attempt += 1
                await anyio.sleep(self.engine.config.retry_delay_s(attempt))

    async def request_input(
        self, task_id: str, method: str, params: Mapping[str, Any]
    ) -> dict[str, Any]:
        run = self.active.get(task_id)
        if run is None:
            raise InternalError(detail="request_input outside a running task")
        run.asked += 1
        pending = PendingInput(
            id=secrets.token_hex(8),  # the key, unique for the task's life
            task_id=task_id,
            method=method,
            params=dict(params),
            seq=run.asked,
        )
        run.pending[pending.id] = pending
        engine = self.engine
        coord = engine.coordination
        answered = False
        message = f"Waiting for the requestor to answer {method}"
        try:
            # Offered and marked input_required in one step (coordination.py).
            rec = await self._stubborn(
                lambda: coord.offer_input(run, pending, message, engine.clock())
            )
            if rec is not None:  # R-INPUT-1
                await engine.status_changed(rec)
            run.signal()
            await coord.wait_answer(run, pending)
            answered = True
        finally:
            run.pending.pop(pending.id, None)
            with anyio.CancelScope(shield=True):
                if not answered:
                    await coord.withdraw_input(run, pending)
                if not run.pending and not run.scope.cancel_called:
                    # Back to working unless a request is outstanding, in one step.
                    try:
                        rec = await coord.resume(run, task_id, engine.clock())
                    except TaskError as exc:  # the outcome's write moves it on anyway
                        engine.log.info("task %s: still input_required: %s", task_id, exc.message)
                        rec = None
                    if rec is not None:  # R-INPUT-4
                        await engine.status_changed(rec)
        if pending.error is not None:
            raise pending.error
        return pending.answer if pending.answer is not None else {}


async def await_terminal(
    engine: TaskEngine,
    requestor: str,
    task_id: str,
    on_input: InputHandler | None,
    face: str | None = None,
) -> TaskRecord:
    """The task once terminal (R-RESULT-2), delivering its input requests to ``on_input``
    meanwhile (R-INPUT-3), whichever instance runs the work.

    One read when the task is terminal already; else one more per wake-up, none when the
    work ran here (its run hands over the record its outcome stored)."""
    return await await_settled(engine, requestor, task_id, face, TERMINAL, on_input)


#: where :func:`await_settled` stops by default: the task ended, or it asks for input
SETTLED = frozenset({*TERMINAL, INPUT_REQUIRED})


async def await_settled(
    engine: TaskEngine,
    requestor: str,
    task_id: str,
    face: str | None = None,
    until: frozenset[TaskStatus] = SETTLED,
    on_input: InputHandler | None = None,
) -> TaskRecord:
    """The task once its status is in ``until`` (terminal or ``INPUT_REQUIRED``), its input
    requests delivered to ``on_input`` meanwhile when given: one read, or none when the
    work ran here (its run hands over the record its outcome stored); nothing counted or
    audited."""
    ended = await _outcome(engine, requestor, task_id, face)
    if ended is not None:
        return ended
    with engine.coordination.waiter(task_id, requestor) as waiter:
        waiter.arm()
        rec = await engine.lookup(requestor, task_id, face)
        if on_input is not None and rec.status not in until:  # no task group otherwise
            return await _delivering(engine, waiter, rec, face, until, on_input)
        while rec.status not in until:
            rec = await _next(engine, waiter, rec, requestor, task_id, face)
        return rec


async def _delivering(
    engine: TaskEngine,
    waiter: Waiter,
    rec: TaskRecord,
    face: str | None,
    until: frozenset[TaskStatus],
    on_input: InputHandler,
) -> TaskRecord:
    """Wait as :func:`await_settled` does, handing each input request to ``on_input``."""
    requestor, task_id = rec.requestor, rec.task_id
    delivering: set[str] = set()
    failure: TaskError | None = None
    async with anyio.create_task_group() as tg:
        try:
            while rec.status not in until:
                for p in await waiter.pending(rec):
                    if p.id not in delivering:
                        delivering.add(p.id)
                        tg.start_soon(_deliver, waiter, p, on_input, delivering)
                rec = await _next(engine, waiter, rec, requestor, task_id, face)
        except TaskError as exc:
            failure = exc
        tg.cancel_scope.cancel()
    if failure is not None:
        raise failure
    return rec


async def _outcome(
    engine: TaskEngine, requestor: str, task_id: str, face: str | None
) -> TaskRecord | None:
    """When the requestor's work of ``task_id`` returned here and its outcome is being
    stored (it asks for no input any more; or the store did not take it yet and it is kept,
    ``outcomes.py``), the record that write returns, without a read first; None otherwise
    (or when the write did not end the task): read the store."""
    run = engine.runs.get(task_id)
    if run is None or run.busy or run.requestor != requestor:
        return None
    while run.final is None and engine.runs.get(task_id) is run:
        await run.changed.wait()  # the run's end signals it, after its outcome is stored
    if run.final is None:
        return None
    return await engine.checked(requestor, task_id, run.final, face)


async def _next(
    engine: TaskEngine,
    waiter: Waiter,
    rec: TaskRecord,
    requestor: str,
    task_id: str,
    face: str | None,
) -> TaskRecord:
    """The task after the next wake-up: the record the work that ended it here stored,
    else read again (armed before the read: a change after it wakes the next wait).

    When the work runs here, a store that blinks is waited out: an outcome the store did
    not take yet is waited for on the run (no read), and a read that fails while the work
    still runs leaves the task as it was (nothing can change it elsewhere meanwhile)."""
    await waiter.wait(rec)
    final = waiter.final()
    waiter.arm()
    if final is not None:
        return await engine.checked(requestor, task_id, final, face)
    ended = await _outcome(engine, requestor, task_id, face)
    if ended is not None:
        return ended
    try:
        return await engine.lookup(requestor, task_id, face)
    except StoreUnavailable:
        if engine.runs.get(task_id) is None:
            raise
        return rec


async def _deliver(
    waiter: Waiter, p: PendingInput, on_input: InputHandler, delivering: set[str]
) -> None:
    """Ask the requestor one input request and hand the answer to the work."""
    done = False
    try:
        error: TaskError | None = None
        answer: dict[str, Any] | None = None
        try:
            answer = await on_input(p)
        except TaskError as exc:
            error = exc
        except Exception as exc:
            error = InternalError(detail=f"input request failed: {type(exc).__name__}")
        done = await waiter.answer(p, answer, error)
    finally:
        # An answered request stays in ``delivering``: a claim read before the answer was
        # stored may list it once more, and input keys are never reused (R-INPUT-3).
        if not done:  # this waiter went away: let another tasks/result deliver it
            delivering.discard(p.id)
            with anyio.CancelScope(shield=True):
                await waiter.release(p)
