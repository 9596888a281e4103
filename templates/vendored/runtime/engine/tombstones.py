"""Tombstones: recently expired task IDs, so a late ``tasks/get`` answers "Task has
expired" rather than "Task not found" (R-TTL-3).

Bounded three ways (R-SEC-4): IDs per requestor, requestors, and IDs in all; the oldest
go first. About 140 bytes per ID.
"""

from __future__ import annotations

from collections import OrderedDict


class Tombstones:
    """Per-requestor LRU sets of expired task IDs with a total cap."""

    __slots__ = ("_by_requestor", "count", "max_requestors", "max_total", "per_requestor")

    def __init__(self, per_requestor: int, max_requestors: int, max_total: int) -> None:
        self.per_requestor = per_requestor
        self.max_requestors = max_requestors
        self.max_total = max_total
        self._by_requestor: OrderedDict[str, OrderedDict[str, None]] = OrderedDict()
        #: IDs kept in all
        self.count = 0

    def __len__(self) -> int:
        """How many requestors have tombstones."""
        return len(self._by_requestor)

    def add(self, requestor: str, task_id: str) -> None:
        """Remember that ``requestor``'s task ``task_id`` expired."""
        by_req = self._by_requestor
        stones = by_req.get(requestor)
        if stones is None:
            stones = by_req[requestor] = OrderedDict()
            while len(by_req) > self.max_requestors:
                self.count -= len(by_req.popitem(last=False)[1])
        else:
            by_req.move_to_end(requestor)
        if task_id not in stones:
            stones[task_id] = None
            self.count += 1
        while len(stones) > self.per_requestor:
            stones.popitem(last=False)
            self.count -= 1
        while self.count > self.max_total and by_req:
            oldest_requestor, oldest = next(iter(by_req.items()))
            if oldest:
                oldest.popitem(last=False)
                self.count -= 1
            if not oldest:
                del by_req[oldest_requestor]
        if not stones and requestor in by_req:
            del by_req[requestor]

    def __contains__(self, key: tuple[str, str]) -> bool:
        """``(requestor, task_id) in tombstones``."""
        stones = self._by_requestor.get(key[0])
        return stones is not None and key[1] in stones
