"""A run's values and the work's side of it: what a task's work gets (``TaskContext``), the
input requests it makes (R-INPUT-*), how its outcome is decided, and :class:`Run`, the run of
one task's work in this process as small values per concern:

- :class:`RunTtl`: its ttl and expiry as stored, renewed while it runs (``renewals.py``);
- :class:`RunInputs`: its outstanding input requests (the input hand-over,
  ``coordination.py``), changed through its methods only;
- :class:`KeptOutcome`: the outcome the store did not take yet (``outcomes.py``);
- the run itself: its requestor, cancel scope, change signal and the record its outcome
  stored.

Who owns a run's life is the supervisor (``supervisor.py``): it alone creates, registers and
ends runs. This module imports no other part of the engine.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, overload

import anyio

from ...errors import InternalError, TaskError
from ...protocol import COMPLETED, FAILED, TaskStatus
from ...store import TaskRecord
from ..logs import logger
from .limits import bounded_outcome, outcome_size
from .progress import progress_text

Work = Callable[["TaskContext"], Awaitable[dict[str, Any]]]
InputHandler = Callable[["PendingInput"], Awaitable[dict[str, Any]]]
IsErrorResult = Callable[[dict[str, Any]], bool]
#: (status, statusMessage, result, error) a run ends with
Outcome = tuple[TaskStatus, str | None, dict[str, Any] | None, dict[str, Any] | None]

#: statusMessage and error of tasks interrupted by a process that died or shut down.
INTERRUPTED_MESSAGE = "Task failed: the server stopped before the task finished"

log = logger("runtime")


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


def request_of(p: PendingInput) -> InputRequest:
    return InputRequest(key=p.id, task_id=p.task_id, method=p.method, params=p.params)


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


class RunTtl:
    """A running task's ttl: asked for at creation, its expiry as this engine last stored
    it (renewals move it), and the lock that keeps one ttl change at a time."""

    __slots__ = ("created_at", "expires_at", "lock", "renewed", "stopped", "ttl_ms")

    def __init__(self, created_at: float = 0.0, ttl_ms: int | None = None) -> None:
        #: the task's creation and the ttl it was given (``ttl_ms`` None: unlimited)
        self.created_at = created_at
        self.ttl_ms = ttl_ms
        self.expires_at = None if ttl_ms is None else created_at + ttl_ms / 1000.0
        self.renewed = False
        #: set when the work is stopped (ended elsewhere): never renewed after
        self.stopped = False
        #: made by the first renewal (``renewals.Renewals``)
        self.lock: anyio.Lock | None = None


class RunInputs:
    """The input requests of a run's work not answered yet, by key, in creation order."""

    __slots__ = ("_step", "asked", "pending")

    def __init__(self) -> None:
        self.pending: dict[str, PendingInput] = {}
        self.asked = 0  # input requests made so far (their ``seq``)
        self._step: anyio.Lock | None = None

    @property
    def step(self) -> anyio.Lock:
        """Serialises the work's input requests with the answers' resumes of its task (the
        local coordination's input steps); made when the work first asks for input."""
        lock = self._step
        if lock is None:
            lock = self._step = anyio.Lock(fast_acquire=True)
        return lock

    def __bool__(self) -> bool:
        return bool(self.pending)

    def add(self, pending: PendingInput) -> None:
        self.pending[pending.id] = pending

    def drop(self, key: str) -> None:
        self.pending.pop(key, None)

    def outstanding(self) -> bool:
        """Whether the work waits for an answer nobody gave yet."""
        return any(not p.answered.is_set() for p in self.pending.values())

    def requests(self) -> list[InputRequest]:
        """The requests not answered yet, oldest first."""
        return [request_of(p) for p in self.pending.values() if not p.answered.is_set()]

    def claim(self) -> list[PendingInput]:
        """The requests no waiter delivers yet, now claimed."""
        out = [p for p in self.pending.values() if not p.claimed]
        for p in out:
            p.claimed = True
        return out

    def take(self, answers: Mapping[str, Mapping[str, Any]]) -> set[str]:
        """Hand the answers under outstanding keys to the work; the keys taken."""
        taken: set[str] = set()
        for key in answers.keys() & self.pending.keys():
            p = self.pending[key]
            if p.answered.is_set():
                continue
            p.answer = dict(answers[key])
            p.answered.set()
            del self.pending[key]
            taken.add(key)
        return taken


class KeptOutcome:
    """An outcome the store did not take yet: its writes so far and the next one's time."""

    __slots__ = ("attempts", "outcome", "retry_at", "storing")

    def __init__(self, outcome: Outcome, retry_at: float) -> None:
        self.outcome = outcome
        self.attempts = 1
        self.retry_at = retry_at
        self.storing = False


class Run:
    """A task's work running in this engine (see the module): made and ended by the
    supervisor only."""

    __slots__ = (
        "_changed", "_inputs", "_stopped", "busy", "final", "kept", "requestor", "scope",
        "started", "tool_error", "ttl",
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
        self.ttl = RunTtl(created_at, ttl_ms)
        self._inputs: RunInputs | None = None  # ``inputs``, made on first use
        #: the outcome the store did not take yet (``outcomes.py``)
        self.kept: KeptOutcome | None = None
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
        #: The run's one cancel scope: its work runs in it, then its outcome is stored in it,
        #: shielded (``RunSupervisor._run``). Cancelled through ``cancel`` only.
        self.scope = anyio.CancelScope()
        self._stopped = False  # ``stopped``
        self._changed: anyio.Event | None = None  # ``changed``, made on first use

    #: The event the next ``signal()`` sets.
    changed = LazyEvent()

    @property
    def inputs(self) -> RunInputs:
        """Its input requests (made when first asked for: most work asks for none)."""
        inputs = self._inputs
        if inputs is None:
            inputs = self._inputs = RunInputs()
        return inputs

    @property
    def waiting(self) -> bool:
        """Whether its work waits for an answer to an input request."""
        return self._inputs is not None and bool(self._inputs.pending)

    @property
    def stopped(self) -> bool:
        """Whether the work was stopped (a cancel, an expiry, ended elsewhere, the process
        leaving it), whether it still ran then or had returned already."""
        return self._stopped

    def signal(self) -> None:
        """Wake every waiter (each waits on the event it saw; a fresh one replaces it)."""
        ev, self._changed = self._changed, None
        if ev is not None:
            ev.set()

    def cancel(self) -> None:
        """Stop the work (its wait for input too): no outcome of it is stored then. Once the
        work returned, its outcome is stored in the same scope, shielded, and the store is
        not interrupted: only ``stopped`` tells of the cancel."""
        self._stopped = True
        if self.busy:
            self.scope.cancel()

    def stop(self) -> None:
        """Cancel the work (``cancel``) and wake its waiters."""
        self.ttl.stopped = True
        self.cancel()
        self.signal()


class RunCalls(Protocol):
    """What a task's context calls on whoever runs its work (the supervisor)."""

    async def set_message(self, task_id: str, message: str) -> None: ...

    async def note_progress(self, task_id: str, text: str) -> None: ...

    async def request_input(
        self, task_id: str, method: str, params: Mapping[str, Any]
    ) -> dict[str, Any]: ...


class TaskContext:
    """What a task's work gets: its identity, its status message, progress and input
    requests."""

    def __init__(
        self, runs: RunCalls, task_id: str, requestor: str, progress_token: str | int | None
    ) -> None:
        self._runs = runs
        self.task_id = task_id
        self.requestor = requestor
        self.progress_token = progress_token

    async def set_status_message(self, message: str) -> None:
        await self._runs.set_message(self.task_id, message)

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """The work's progress, shown as the task's ``statusMessage`` (throttled: at most one
        write per ``EngineConfig.progress_message_interval_s``, the latest report kept)."""
        await self._runs.note_progress(self.task_id, progress_text(progress, total, message))

    async def request_input(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """Ask the requestor (``elicitation/create``, ``sampling/createMessage``, ...) and wait.

        The task is ``input_required`` until every pending request is answered, then
        ``working`` again (R-INPUT-1, R-INPUT-4). Cancelling the task ends the wait.
        An error answer is raised here as a ``TaskError``."""
        return await self._runs.request_input(self.task_id, method, params)


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
        log.exception("task %s: work raised", tc.task_id)
        err = InternalError(detail=f"{type(exc).__name__}: {exc}")
        return (FAILED, err.message, None, err.to_error())


def interrupted() -> Outcome:
    """The outcome of work the engine's shutdown interrupted."""
    err = InternalError(message=INTERRUPTED_MESSAGE)
    return (FAILED, INTERRUPTED_MESSAGE, None, err.to_error())


def bounded(task_id: str, outcome: Outcome, max_bytes: int) -> tuple[Outcome, int]:
    """``outcome``, or the ``ResultTooLarge`` failure kept instead of a result or error over
    ``max_bytes`` (``EngineConfig.max_result_bytes``, R-SEC-4), and the bytes of result,
    error and statusMessage it keeps (measured once: the byte caps count them when it is
    stored)."""
    status, message, result, error = outcome
    size, too_large = bounded_outcome(result, error, max_bytes, message)
    if too_large is None:
        return outcome, size
    log.warning("task %s: %s", task_id, too_large.message)
    error = too_large.to_error()
    return (FAILED, too_large.message, None, error), outcome_size(None, error, too_large.message)
