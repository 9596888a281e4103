"""The operators' part of the store-conformance suite: a task's ``tool`` is kept, and
``list_all`` lists every requestor's tasks, filtered, newest first, paged by ``next``.

``StoreConformance`` includes these tests; they need nothing but the ``store`` fixture.
"""

from __future__ import annotations

from typing import Any

from ..protocol import CANCELLED, COMPLETED, INPUT_REQUIRED, REVISION, TOOLS_CALL, WORKING
from ..store import TaskQuery, TaskRecord, TaskStore
from .pytest_api import parametrize

T0 = 1_764_000_000.0


def tool_record(
    task_id: str, requestor: str = "alice", *, tool: str | None = "report", at: float = T0
) -> TaskRecord:
    """A new task as the engine creates one for a ``tools/call`` of ``tool``."""
    return TaskRecord(task_id, requestor, TOOLS_CALL, WORKING, at, at, 60_000, 500, tool=tool)


async def walk(store: TaskStore, query: TaskQuery, limit: int) -> list[str]:
    """Every task ID ``query`` keeps, page after page (each page at most ``limit``)."""
    out: list[str] = []
    before: tuple[float, str] | None = None
    for _ in range(1000):
        page = await store.list_all(query, before=before, limit=limit)
        assert len(page.tasks) <= limit
        out += [r.task_id for r in page.tasks]
        if page.next is None:
            return out
        before = page.next
    raise AssertionError("list_all never ended")


class AdminConformance:
    """``tool`` and ``list_all``: mixed into ``StoreConformance``."""

    async def test_tool_is_kept(self, store: TaskStore) -> None:
        await store.create(tool_record("t1"))
        await store.create(tool_record("t2", tool=None))
        new = await store.transition("t1", COMPLETED, now=T0 + 1, result={"content": []})
        assert new is not None and new.tool == "report"
        one, two = await store.get("t1"), await store.get("t2")
        assert one is not None and one.tool == "report" and one.face == REVISION
        assert two is not None and two.tool is None
        listed = await store.list_tasks("alice", after=None, limit=10)
        assert [(r.task_id, r.tool) for r in listed] == [("t1", "report"), ("t2", None)]

    async def _fill(self, store: TaskStore) -> None:
        rows: list[tuple[str, str, str | None, float]] = [
            ("a1", "alice", "report", T0),
            ("b1", "bob", "export", T0 + 1),
            ("a2", "alice", "export", T0 + 2),
            ("c1", "carol", None, T0 + 3),
            ("b2", "bob", "report", T0 + 4),
            ("a3", "alice", "report", T0 + 4),  # same created_at as b2: ID order
        ]
        for task_id, requestor, tool, at in rows:
            await store.create(tool_record(task_id, requestor, tool=tool, at=at))
        await store.transition("a2", COMPLETED, now=T0 + 5, result={"content": []})
        await store.transition("b1", CANCELLED, now=T0 + 5)
        await store.transition("a3", INPUT_REQUIRED, now=T0 + 5)

    async def test_list_all_across_requestors_newest_first(self, store: TaskStore) -> None:
        await self._fill(store)
        page = await store.list_all(TaskQuery(), before=None, limit=100)
        assert [r.task_id for r in page.tasks] == ["b2", "a3", "c1", "a2", "b1", "a1"]
        assert page.next is None
        assert {r.requestor for r in page.tasks} == {"alice", "bob", "carol"}
        by_id = {r.task_id: r for r in page.tasks}
        assert by_id["a2"].status == COMPLETED and by_id["a3"].status == INPUT_REQUIRED
        assert by_id["b2"].tool == "report" and by_id["c1"].tool is None

    @parametrize("limit", [1, 2, 5])
    async def test_list_all_pages_R_LIST_1(self, store: TaskStore, limit: int) -> None:
        """Paging by ``next`` gives every task once, in order, whatever the page size."""
        await self._fill(store)
        assert await walk(store, TaskQuery(), limit) == ["b2", "a3", "c1", "a2", "b1", "a1"]

    @parametrize(
        ("query", "expected"),
        [
            ({"statuses": frozenset({WORKING})}, ["b2", "c1", "a1"]),
            ({"statuses": frozenset({COMPLETED, CANCELLED})}, ["a2", "b1"]),
            ({"requestor": "alice"}, ["a3", "a2", "a1"]),
            ({"requestor": "nobody"}, []),
            ({"tool": "report"}, ["b2", "a3", "a1"]),
            ({"tool": "report", "requestor": "bob"}, ["b2"]),
            ({"created_after": T0 + 2}, ["b2", "a3", "c1", "a2"]),
            ({"created_before": T0 + 2}, ["b1", "a1"]),
            ({"created_after": T0 + 1, "created_before": T0 + 4}, ["c1", "a2", "b1"]),
            ({"statuses": frozenset({WORKING}), "requestor": "bob", "tool": "export"}, []),
        ],
    )
    async def test_list_all_filters(
        self, store: TaskStore, query: dict[str, Any], expected: list[str]
    ) -> None:
        await self._fill(store)
        assert await walk(store, TaskQuery(**query), 100) == expected
        assert await walk(store, TaskQuery(**query), 1) == expected

    async def test_list_all_skips_deleted(self, store: TaskStore) -> None:
        await self._fill(store)
        assert await store.delete("c1")
        assert await store.delete("a1")
        assert await walk(store, TaskQuery(), 2) == ["b2", "a3", "a2", "b1"]
        assert await walk(store, TaskQuery(requestor="alice"), 1) == ["a3", "a2"]

    async def test_list_all_after_expiry_R_TTL_3(self, store: TaskStore) -> None:
        await self._fill(store)
        expired = await store.pop_expired(T0 + 62.5, 100)  # ttl 60 s: a1, b1 and a2 are due
        assert sorted(r.task_id for r in expired) == ["a1", "a2", "b1"]
        assert await walk(store, TaskQuery(), 100) == ["b2", "a3", "c1"]

    async def test_list_all_empty_store(self, store: TaskStore) -> None:
        page = await store.list_all(TaskQuery(), before=None, limit=10)
        assert page.tasks == [] and page.next is None
