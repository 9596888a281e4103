"""``tasks/result`` waiting for the end: the task once terminal (R-RESULT-2), its input
requests delivered to the waiting call meanwhile (R-INPUT-3), whichever instance runs the
work.

Built on a narrow :class:`Front` (the engine's authorized reads, its coordination's waiters
and the run supervisor's outcome hand-over); it imports no engine.
"""

from __future__ import annotations

from typing import Any, Protocol

import anyio

from ...errors import InternalError, StoreUnavailable, TaskError
from ...protocol import INPUT_REQUIRED, TERMINAL, TaskStatus
from ...store import TaskRecord
from .coordination import Coordination, Waiter
from .runs import InputHandler, PendingInput
from .supervisor import RunSupervisor

__all__ = ["SETTLED", "Front", "await_settled", "await_terminal"]

#: where :func:`await_settled` stops by default: the task ended, or it asks for input
SETTLED = frozenset({*TERMINAL, INPUT_REQUIRED})


class Front(Protocol):
    """What waiting needs of the engine's front."""

    runs: RunSupervisor

    @property
    def coordination(self) -> Coordination: ...

    async def lookup(self, requestor: str, task_id: str, face: str | None = None) -> TaskRecord:
        """The requestor's own live task (else ``TaskNotFound``/``TaskExpired``)."""
        ...

    async def checked(
        self, requestor: str, task_id: str, rec: TaskRecord | None, face: str | None = None
    ) -> TaskRecord:
        """``rec`` when it is the requestor's own live task, else refused as ``lookup``."""
        ...


async def await_terminal(
    front: Front,
    requestor: str,
    task_id: str,
    on_input: InputHandler | None,
    face: str | None = None,
) -> TaskRecord:
    """The task once terminal (R-RESULT-2), delivering its input requests to ``on_input``
    meanwhile (R-INPUT-3), whichever instance runs the work.

    One read when the task is terminal already; else one more per wake-up, none when the
    work ran here (its run hands over the record its outcome stored)."""
    return await await_settled(front, requestor, task_id, face, TERMINAL, on_input)


async def await_settled(
    front: Front,
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
    ended = await _outcome(front, requestor, task_id, face)
    if ended is not None:
        return ended
    with front.coordination.waiter(task_id, requestor) as waiter:
        waiter.arm()
        rec = await front.lookup(requestor, task_id, face)
        if on_input is not None and rec.status not in until:  # no task group otherwise
            return await _delivering(front, waiter, rec, face, until, on_input)
        while rec.status not in until:
            rec = await _next(front, waiter, rec, requestor, task_id, face)
        return rec


async def _delivering(
    front: Front,
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
                rec = await _next(front, waiter, rec, requestor, task_id, face)
        except TaskError as exc:
            failure = exc
        tg.cancel_scope.cancel()
    if failure is not None:
        raise failure
    return rec


async def _outcome(
    front: Front, requestor: str, task_id: str, face: str | None
) -> TaskRecord | None:
    """The record the requestor's work of ``task_id`` stores as it ends here (no read
    first), checked; None when there is none to wait for: read the store."""
    final = await front.runs.stored_outcome(task_id, requestor)
    if final is None:
        return None
    return await front.checked(requestor, task_id, final, face)


async def _next(
    front: Front,
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
        return await front.checked(requestor, task_id, final, face)
    ended = await _outcome(front, requestor, task_id, face)
    if ended is not None:
        return ended
    try:
        return await front.lookup(requestor, task_id, face)
    except StoreUnavailable:
        if not front.runs.running_here(task_id):
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
