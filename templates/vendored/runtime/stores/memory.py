"""``InMemoryTaskStore``: the embedded default store.

Costs: ``get`` is one dict lookup; ``create`` appends to a per-requestor list kept
ordered by ``(created_at, task_id)`` (an append when clocks move forward, a
``bisect.insort`` otherwise); ``list_tasks`` bisects that list and reads one page;
``pop_expired`` pops an expiry heap, so a sweep costs O(expired · log n), never a
scan of every task. Deletions leave a hole in the per-requestor list that listing
skips; the list is compacted once holes outnumber live entries (amortised O(1)).
One more such list holds every task's key: ``list_all`` (operators) walks it newest
first, reading at most ``SCAN`` entries per call.

Every method runs without awaiting anything, so each one is atomic on the event
loop: ``transition`` compares and writes in one step (R-STATE-2, R-CANCEL-3).
Records handed out are shared with the store: treat them as read-only (the store
replaces, never mutates, a record when it changes).
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right, insort
from dataclasses import fields, replace
from typing import Unpack

from ...protocol import NON_TERMINAL, TERMINAL, TaskStatus
from ...store import Change, TaskPage, TaskQuery, TaskRecord, TaskStore, allowed_sources

#: index entries ``list_all`` reads per call at most (the rest is the next page's)
SCAN = 5000

#: ``TaskRecord``'s fields in order, as ``transition`` builds a changed record from them
_FIELDS = (
    "task_id", "requestor", "method", "status", "created_at", "last_updated_at", "ttl_ms",
    "poll_interval_ms", "status_message", "result", "error", "version", "face", "tool",
)  # fmt: skip
if tuple(f.name for f in fields(TaskRecord)) != _FIELDS:  # pragma: no cover - a new field
    raise ImportError("TaskRecord's fields changed: update InMemoryTaskStore.transition")


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

    def compact(self, tasks: dict[str, TaskRecord]) -> None:
        """Drop the holes once they outnumber the live entries (amortised O(1))."""
        live = len(self.keys) - self.dead
        if self.dead > 32 and self.dead > live:
            self.keys = [k for k in self.keys if k[1] in tasks]
            self.dead = 0


class InMemoryTaskStore(TaskStore):
    """Tasks in a dict, with a per-requestor ordered index and an expiry heap."""

    def __init__(self) -> None:
        self._tasks: dict[str, TaskRecord] = {}
        self._index: dict[str, _Index] = {}
        #: every task's key, for ``list_all``
        self._all = _Index()
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
        key = (record.created_at, record.task_id)
        idx.add(key)
        self._all.add(key)
        if record.status in NON_TERMINAL:
            idx.active += 1
        expires = record.expires_at
        if expires is not None:
            self._push_expiry(expires, record.task_id)

    def _push_expiry(self, expires: float, task_id: str) -> None:
        """Push onto the expiry heap. Entries of deleted tasks (dropped for a requestor's
        cap, say) or of changed ttls wait for their own deadline; once they outnumber the
        live tasks the heap is rebuilt from those, so it holds at most about twice as many
        entries as there are tasks, however fast tasks come and go."""
        heap = self._expiry
        heapq.heappush(heap, (expires, task_id))
        if len(heap) > 2 * len(self._tasks) + 1024:
            self._expiry = [
                (rec.expires_at, rec.task_id)
                for rec in self._tasks.values()
                if rec.expires_at is not None
            ]
            heapq.heapify(self._expiry)

    async def get(self, task_id: str) -> TaskRecord | None:
        return self._tasks.get(task_id)

    async def transition(
        self, task_id: str, status: TaskStatus, *, now: float, **change: Unpack[Change]
    ) -> TaskRecord | None:
        old = self._tasks.get(task_id)
        if old is None or old.status not in allowed_sources(status, change.get("expected")):
            return None
        result, error = change.get("result"), change.get("error")
        # ``dataclasses.replace`` spelled out: a field lookup per field costs it 5x (every
        # status change; the fields checked at import, ``_FIELDS``)
        new = TaskRecord(
            old.task_id,
            old.requestor,
            old.method,
            status,
            old.created_at,
            max(now, old.last_updated_at),
            old.ttl_ms,
            old.poll_interval_ms,
            change.get("status_message"),
            old.result if result is None else result,
            old.error if error is None else error,
            old.version + 1,
            old.face,
            old.tool,
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
        if len(idx.keys) == idx.dead:
            del self._index[rec.requestor]
        else:
            idx.compact(self._tasks)
        self._all.dead += 1
        self._all.compact(self._tasks)

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
            # A stale entry (the task was deleted, or its ttl changed) is dropped here, at its
            # own deadline.
            if rec is None or rec.expires_at != expires:
                continue
            del self._tasks[task_id]
            self._unindex(rec)
            out.append(rec)
        return out

    async def set_ttl(self, task_id: str, ttl_ms: int) -> TaskRecord | None:
        old = self._tasks.get(task_id)
        if old is None or old.status in TERMINAL:
            return None
        new = replace(old, ttl_ms=ttl_ms, version=old.version + 1)
        self._tasks[task_id] = new
        expires = new.expires_at
        if expires is not None:  # the old heap entry is dropped at its own deadline
            self._push_expiry(expires, task_id)
        return new

    async def count_active(self, requestor: str) -> int:
        idx = self._index.get(requestor)
        return 0 if idx is None else idx.active

    async def list_all(
        self, query: TaskQuery, *, before: tuple[float, str] | None, limit: int
    ) -> TaskPage:
        """Newest first over the requestor's index (``query.requestor``) or every task's."""
        if query.requestor is not None:
            idx = self._index.get(query.requestor)
            keys = [] if idx is None else idx.keys
        else:
            keys = self._all.keys
        start = query.start(before)
        i = len(keys) if start is None else bisect_left(keys, start)
        out: list[TaskRecord] = []
        tasks, floor = self._tasks, query.created_after
        scanned = 0
        while i > 0 and len(out) < limit and scanned < SCAN:
            i -= 1
            scanned += 1
            key = keys[i]
            if floor is not None and key[0] < floor:
                return TaskPage(out, None)
            rec = tasks.get(key[1])
            if rec is not None and rec.created_at == key[0] and query.matches(rec):
                out.append(rec)
        return TaskPage(out, keys[i] if i > 0 else None)
