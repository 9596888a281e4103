"""``AdminService``: what an operator may do to a server's tasks, over its engine: list
every requestor's tasks (filtered, paged), show one (with its outstanding input requests,
result or error), count them by status, and cancel one by the engine's rules (a terminal
task is not cancelled again; the work is stopped on whichever instance runs it, as
``tasks/cancel`` does: R-CANCEL-2).

The answers are the JSON of ``views`` (the admin API and the dashboard serve them as they
are). Store failures raise ``errors.StoreUnavailable``; a store that cannot list across
requestors raises ``NotImplementedError``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ...protocol import INPUT_REQUIRED, STATUSES, TERMINAL
from ...store import TaskPage, TaskQuery, TaskStore
from ..engine.audit import audit
from ..engine.guard import guarded
from ..engine.task_engine import TaskEngine
from .views import decode_cursor, encode_cursor, inputs_json, query_json, task_view

__all__ = ["OPERATOR_CANCELLED_MESSAGE", "AdminService"]

#: the statusMessage of a task an operator cancelled
OPERATOR_CANCELLED_MESSAGE = "The task was cancelled by an operator"


async def list_all(
    store: TaskStore, query: TaskQuery, before: tuple[float, str] | None, limit: int
) -> TaskPage:
    """``store.list_all``, its failures as ``StoreUnavailable``; ``NotImplementedError``
    when the store cannot list across requestors."""
    if type(store).list_all is TaskStore.list_all:
        raise NotImplementedError(f"{type(store).__name__} cannot list tasks across requestors")
    return await guarded(store.list_all(query, before=before, limit=limit))


class AdminService:
    """An operator's calls on ``engine`` (see the module's docstring)."""

    def __init__(
        self,
        engine: TaskEngine,
        *,
        page_size: int = 50,
        max_page: int = 500,
        summary_limit: int = 10_000,
    ) -> None:
        self.engine = engine
        self.page_size = page_size
        self.max_page = max_page
        #: tasks counted at most by ``summary`` (beyond it the counts say "at least")
        self.summary_limit = summary_limit

    async def list(
        self, query: TaskQuery, cursor: str | None = None, limit: int | None = None
    ) -> dict[str, Any]:
        """One page: ``{"tasks", "nextCursor", "query"}``, newest first."""
        size = max(1, min(limit or self.page_size, self.max_page))
        before = decode_cursor(cursor)
        page = await list_all(self.engine.store, query, before, size)
        now = self.engine.clock()
        return {
            "tasks": [task_view(r, now) for r in page.tasks],
            "nextCursor": encode_cursor(page.next),
            "query": query_json(query),
        }

    async def show(self, task_id: str) -> dict[str, Any] | None:
        """A task's detail (None: no such task)."""
        engine = self.engine
        rec = await engine.guard.get(task_id)
        if rec is None:
            return None
        out = task_view(rec, engine.clock(), detail=True)
        inputs = []
        if rec.status == INPUT_REQUIRED:
            inputs = await engine.coordination.inputs(task_id, rec.requestor)
        out["inputRequests"] = inputs_json(inputs)
        return out

    async def cancel(self, task_id: str) -> dict[str, Any]:
        """``{"moved": bool, "task": view or None}``: cancelled now (moved), or left as it is
        (terminal already, or unknown: ``task`` None)."""
        rec, moved = await self.engine.cancel_task(task_id, OPERATOR_CANCELLED_MESSAGE)
        if rec is not None:
            audit("operator_cancel", rec.requestor, task_id, cancelled=moved)
        view = None if rec is None else task_view(rec, self.engine.clock(), detail=True)
        return {"moved": moved, "task": view}

    async def summary(self, query: TaskQuery) -> dict[str, Any]:
        """How many tasks of each status ``query`` keeps (its statuses aside), counting at
        most ``summary_limit``: ``{"counts", "total", "complete", "statuses", "terminal"}``
        (the statuses in lifecycle order, and the terminal ones: the page knows no other)."""
        counts = {s.value: 0 for s in STATUSES}
        every = replace(query, statuses=None)
        before: tuple[float, str] | None = None
        total = 0
        while total < self.summary_limit:
            want = min(1000, self.summary_limit - total)
            page = await list_all(self.engine.store, every, before, want)
            for rec in page.tasks:
                counts[rec.status.value] += 1
            total += len(page.tasks)
            if page.next is None:
                return _summary(counts, total, True)
            before = page.next
        return _summary(counts, total, False)


def _summary(counts: dict[str, int], total: int, complete: bool) -> dict[str, Any]:
    return {
        "counts": counts,
        "total": total,
        "complete": complete,
        "statuses": [s.value for s in STATUSES],
        "terminal": sorted(s.value for s in TERMINAL),
    }
