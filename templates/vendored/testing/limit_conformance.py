"""The active-task cap's part of the store-conformance suite (R-SEC-4): ``create_limited``
at exactly the cap and one over it, with every active status.

``StoreConformance`` includes these tests; they need nothing but the ``store`` fixture.
"""

from __future__ import annotations

from ..protocol import (
    COMPLETED,
    INITIAL,
    INPUT_REQUIRED,
    TERMINAL,
    TOOLS_CALL,
    WORKING,
    TaskStatus,
)
from ..store import TaskRecord, TaskStore
from .pytest_api import parametrize

T0 = 1_764_000_000.0


def record(task_id: str, requestor: str = "alice", *, status: TaskStatus = INITIAL) -> TaskRecord:
    """A new task record as the engine would create it."""
    return TaskRecord(task_id, requestor, TOOLS_CALL, status, T0, T0, 60_000, 500)


class LimitConformance:
    @parametrize("cap", [1, 3])
    async def test_create_limited_at_the_cap_and_one_over_R_SEC_4(
        self, store: TaskStore, cap: int
    ) -> None:
        """The cap is the number of active tasks a requestor may hold: with ``cap - 1``
        active (every non-terminal status counts), one more is created (exactly at the
        cap), the next is refused (one over) and writes nothing; ended tasks and another
        requestor's do not count; a task that ends makes room for exactly one."""
        for i, terminal in enumerate(sorted(TERMINAL)):  # ended tasks: never counted
            await store.create(record(f"ended{i}", status=WORKING))
            await store.transition(f"ended{i}", terminal, now=T0 + 1)
        for i in range(cap + 1):  # another requestor at and over the cap: not counted
            await store.create(record(f"bob{i}", "bob", status=WORKING))
        active = [INITIAL, WORKING, INPUT_REQUIRED]
        for i in range(cap - 1):
            await store.create(record(f"t{i}", status=active[i % len(active)]))
        assert await store.count_active("alice") == cap - 1
        assert await store.create_limited(record("at-cap", status=WORKING), cap) is True
        assert await store.count_active("alice") == cap
        assert await store.create_limited(record("over", status=WORKING), cap) is False
        assert await store.get("over") is None and await store.count_active("alice") == cap
        await store.transition("at-cap", INPUT_REQUIRED, now=T0 + 2)  # still active
        assert await store.create_limited(record("over", status=WORKING), cap) is False
        await store.transition("at-cap", COMPLETED, now=T0 + 3)
        assert await store.create_limited(record("again", status=WORKING), cap) is True
        assert await store.create_limited(record("over", status=WORKING), cap) is False
        assert await store.count_active("alice") == cap
