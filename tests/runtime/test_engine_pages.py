"""``tasks/list`` pages stay full when the store holds tasks the page leaves out: another
face's (the face is the store query's filter) and tasks past their ttl that no sweep has
removed yet (the engine reads on, a bounded number of times)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from mcp_tasks.protocol import FAILED
from mcp_tasks.runtime import EngineConfig, InMemoryTaskStore, TaskEngine
from mcp_tasks.store import TaskRecord
from testkit.core_calls import create_task
from testkit.engine_kit import ALICE, Clock, call, instant

pytestmark = pytest.mark.anyio

#: ttls counted from creation, as the tests of expired tasks need: no renewal of a running
#: task's ttl (on a shared store a short ttl is renewed as its work starts) races the clock.
FROM_CREATION = {"keep_running_tasks": False}


async def list_pages(eng: TaskEngine) -> list[list[str]]:
    """Every ``tasks/list`` page of alice's, following ``nextCursor``: the task IDs of each."""
    pages: list[list[str]] = []
    cursor = None
    while True:
        page = await call(eng, "tasks/list", **({} if cursor is None else {"cursor": cursor}))
        pages.append([t["taskId"] for t in page["tasks"]])
        cursor = page.get("nextCursor")
        if cursor is None:
            return pages


def full_until_last(pages: list[list[str]], size: int) -> bool:
    return all(len(p) == size for p in pages[:-1]) and 0 < len(pages[-1]) <= size


async def assert_listed_in_full_pages(eng: TaskEngine, expected: list[str]) -> None:
    """alice's listing is pages of 3, each full until the last, of ``expected`` in order."""
    pages = await list_pages(eng)
    assert full_until_last(pages, 3), pages
    assert [tid for page in pages for tid in page] == expected


async def test_list_pages_full_beside_another_faces_tasks_R_LIST_1(
    make_engine: Callable[..., TaskEngine], clock: Clock
) -> None:
    """A requestor who also has tasks of the other face: every 2025-11-25 page is full
    until the last and lists each of its tasks once (the face is the store query's
    filter, not a filter after a read of one page)."""
    async with make_engine(page_size=3, max_active_per_requestor=1000) as eng:
        core = []
        for i in range(8):
            for _ in range(5 if i % 3 == 0 else 1):  # runs longer than a page, and short ones
                clock.now += 0.001
                await eng.start("alice", "another-face", "tools/call", instant, tool_error=FAILED)
            clock.now += 0.001
            core.append((await create_task(eng, ALICE, "tools/call", instant))["task"]["taskId"])
        await assert_listed_in_full_pages(eng, core)


async def test_list_pages_full_past_expired_unswept_tasks_R_LIST_1_R_TTL_3(
    make_engine: Callable[..., TaskEngine], clock: Clock
) -> None:
    """Tasks past their ttl that no sweep removed yet are left out of the listing without
    leaving its pages short: the engine reads on until the page is full."""
    async with make_engine(page_size=3, max_active_per_requestor=1000, **FROM_CREATION) as eng:
        live = []
        for i in range(12):
            clock.now += 0.001
            ttl = 1000 if i % 3 else 100_000  # two of every three expire
            created = await create_task(eng, ALICE, "tools/call", instant, task={"ttl": ttl})
            if ttl > 1000:
                live.append(created["task"]["taskId"])
        clock.now += 2
        await assert_listed_in_full_pages(eng, live)


async def test_list_cursor_continues_where_reading_stopped_R_LIST_1_R_TTL_3(
    make_engine: Callable[..., TaskEngine], clock: Clock
) -> None:
    """A long run of expired, unswept tasks costs a page a bounded number of reads: the
    page then ends where the reading stopped (shorter, with a cursor), and the next one
    goes on from there; every live task is listed once."""
    async with make_engine(page_size=1, max_active_per_requestor=1000, **FROM_CREATION) as eng:
        live = []
        for i in range(40):
            clock.now += 0.001
            ttl = 100_000 if i in (0, 39) else 1000
            created = await create_task(eng, ALICE, "tools/call", instant, task={"ttl": ttl})
            if ttl > 1000:
                live.append(created["task"]["taskId"])
        clock.now += 2
        pages = await list_pages(eng)
        assert len(pages) > 2 and [] in pages
        assert [tid for page in pages for tid in page] == live


class FacelessStore(InMemoryTaskStore):
    """A store written before listings took a ``face``: it lists every face."""

    async def list_tasks(  # type: ignore[override]
        self, requestor: str, *, after: tuple[float, str] | None, limit: int
    ) -> list[TaskRecord]:
        return await super().list_tasks(requestor, after=after, limit=limit)


async def test_a_store_without_the_face_filter_still_lists_full_pages_R_LIST_1(
    clock: Clock,
) -> None:
    async with TaskEngine(FacelessStore(), EngineConfig(page_size=2), clock=clock) as eng:
        core = []
        for _ in range(3):
            for _ in range(2):
                clock.now += 0.001
                await eng.start("alice", "another-face", "tools/call", instant, tool_error=FAILED)
            clock.now += 0.001
            core.append((await create_task(eng, ALICE, "tools/call", instant))["task"]["taskId"])
        pages = await list_pages(eng)
        assert full_until_last(pages, 2), pages
        assert [tid for page in pages for tid in page] == core
