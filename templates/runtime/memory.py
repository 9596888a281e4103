"""``InMemoryTaskStore``: the embedded default store.

Costs: ``get`` is one dict lookup; ``create`` appends to a per-requestor list kept
ordered by ``(created_at, task_id)`` (an append when clocks move forward, a
``bisect.insort`` otherwise); ``list_tasks`` bisects that list and reads one page;
``pop_expired`` pops an expiry heap, so a sweep costs O(expired · log n), never a
scan of every task. Deletions leave a hole in the per-requestor list that listing
skips; the list is compacted once holes outnumber live entries (amortised O(1)).

Every method runs without awaiting anything, so each one is atomic on the event
loop: ``transition`` compares and writes in one step (R-STATE-2, R-CANCEL-3).
Records handed out are shared with the store: treat them as read-only (the store
replaces, never mutates, a record when it changes).
"""

from __future__ import annotations

import heapq
from bisect import bisect_right, insort
from dataclasses import replace
from typing import Unpack

from ..protocol import NON_TERMINAL, TERMINAL, TaskStatus
from ..store import Change, TaskRecord, TaskStore, allowed_sources


class _Index:
    """One requestor's ``(created_at, task_id)`` keys, sorted, with lazy deletion."""

    __slots__ = ("active", "dead", "keys")

    def __init__(self) -> None:
        self.keys: list[tuple[float, str]] = []
        self.dead = 0
        self.active = 0

    def add(self, key: tuple[float, str]) -> None:
        keys = self.keys
        if not keys or keys[-1] < key:
            keys.append(key)
        else:
            insort(keys, key)


class InMemoryTaskStore(TaskStore):
    """Tasks in a dict, with a per-requestor ordered index and an expiry heap."""

    def __init__(self) -> None:
        self._tasks: dict[str, TaskRecord] = {}
        self._index: dict[str, _Index] = {}
        self._expiry: list[tuple[float, str]] = []

    def __len__(self) -> int:
        return len(self._tasks)

    async def create(self, record: TaskRecord) -> None:
        if record.task_id in self._tasks:
            raise KeyError(record.task_id)
        self._tasks[record.task_id] = record
        idx = self._index.get(record.requestor)
        if idx is None:
            idx = self._index[record.requestor] = _Index()
        idx.add((record.created_at, record.task_id))
        if record.status in NON_TERMINAL:
            idx.active += 1
        expires = record.expires_at
        if expires is not None:
            heapq.heappush(self._expiry, (expires, record.task_id))

    async def get(self, task_id: str) -> TaskRecord | None:
        return self._tasks.get(task_id)

    async def transition(
        self, task_id: str, status: TaskStatus, *, now: float, **change: Unpack[Change]
    ) -> TaskRecord | None:
        old = self._tasks.get(task_id)
        if old is None or old.status not in allowed_sources(status, change.get("expected")):
            return None
        result, error = change.get("result"), change.get("error")
        new = replace(
            old,
            status=status,
            last_updated_at=max(now, old.last_updated_at),
            status_message=change.get("status_message"),
            result=old.result if result is None else result,
            error=old.error if error is None else error,
            version=old.version + 1,
        )
        self._tasks[task_id] = new
        was_active = old.status not in TERMINAL
        is_active = status not in TERMINAL
        if was_active != is_active:
            self._index[old.requestor].active += 1 if is_active else -1
        return new

    async def list_tasks(
        self,
        requestor: str,
        *,
        after: tuple[float, str] | None,
        limit: int,
        face: str | None = None,
    ) -> list[TaskRecord]:
        idx = self._index.get(requestor)
        if idx is None or limit <= 0:
            return []
        keys = idx.keys
        i = 0 if after is None else bisect_right(keys, after)
        out: list[TaskRecord] = []
        tasks = self._tasks
        n = len(keys)
        while i < n and len(out) < limit:
            rec = tasks.get(keys[i][1])
            if rec is not None and (face is None or rec.face == face):
                out.append(rec)
            i += 1
        return out

    def _unindex(self, rec: TaskRecord) -> None:
        idx = self._index[rec.requestor]
        if rec.status not in TERMINAL:
            idx.active -= 1
        idx.dead += 1
        live = len(idx.keys) - idx.dead
        if live == 0:
            del self._index[rec.requestor]
        elif idx.dead > 32 and idx.dead > live:
            tasks = self._tasks
            idx.keys = [k for k in idx.keys if k[1] in tasks]
            idx.dead = 0

    async def delete(self, task_id: str) -> bool:
        rec = self._tasks.pop(task_id, None)
        if rec is None:
            return False
        self._unindex(rec)
        return True

    async def pop_expired(self, now: float, limit: int) -> list[TaskRecord]:
        heap = self._expiry
        out: list[TaskRecord] = []
        while heap and heap[0][0] <= now and len(out) < limit:
            expires, task_id = heapq.heappop(heap)
            rec = self._tasks.get(task_id)
            # A stale entry (the task was deleted) is dropped here, at its own deadline.
            if rec is None or rec.expires_at != expires:
                continue
            del self._tasks[task_id]
            self._unindex(rec)
            out.append(rec)
        return out

    async def count_active(self, requestor: str) -> int:
        idx = self._index.get(requestor)
        return 0 if idx is None else idx.active
