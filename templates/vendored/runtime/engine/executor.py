"""Where a task's work runs: the one small protocol between the engine and its executors.

Work that runs in this process is a plain ``Work`` function (``runs.py``): the engine's run
supervisor runs it. Work that an executor runs elsewhere (Docket workers: ``offload.py``)
is a :class:`HandedWork`: the engine stores the task through the executor's ``guard`` and
calls :meth:`HandedWork.hand_over` instead of running it. The engine knows this protocol,
never an executor; the executors' registry (``executors.py``) picks one per tool, so a new
executor is added without touching the engine or the router.
"""

from __future__ import annotations

from typing import Any

from ...errors import InternalError
from ...protocol import TaskStatus
from ...store import TaskRecord
from .guard import StoreGuard

__all__ = ["HandedWork"]


class HandedWork:
    """The work of a task an executor runs elsewhere (subclass it)."""

    @property
    def guard(self) -> StoreGuard:
        """The guard the task is created through (the executor's view of the store)."""
        raise NotImplementedError

    async def hand_over(
        self, rec: TaskRecord, tool_error: TaskStatus, progress_token: str | int | None
    ) -> None:
        """Give the stored task to the executor; raises when it cannot take it (the engine
        then fails the task)."""
        raise NotImplementedError

    async def __call__(self, tctx: Any) -> dict[str, Any]:
        raise InternalError(detail="this task's work runs elsewhere, not in this process")
