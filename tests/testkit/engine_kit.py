"""The task engine on each store, in-process: the stores a test runs against, a settable
clock, and the engine fixtures and helpers of the engine tests (``tests/runtime``).

A test module takes the fixtures by importing them::

    from testkit.engine_kit import clock, engine, make_engine, store_factory  # noqa: F401

``store_factory`` is parametrized over :data:`STORES`; its ``redis`` case uses the session's
``redis_server`` (:mod:`testkit.redis_fixtures`, which the runtime tests' conftest provides).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_tasks.core.handlers import RequestContext
from mcp_tasks.errors import TaskError
from mcp_tasks.runtime import (
    EngineConfig,
    InMemoryTaskStore,
    SqliteTaskStore,
    TaskContext,
    TaskEngine,
)
from mcp_tasks.store import TaskStore
from testkit.core_calls import handle
from testkit.wait import until_async

#: The stores every engine test runs against.
STORES = ("memory", "sqlite", "redis")
ALICE = RequestContext(requestor="alice", progress_token="tok-1")
BOB = RequestContext(requestor="bob")
NOT_FOUND = "Failed to retrieve task: Task not found"
EXPIRED = "Failed to retrieve task: Task has expired"
Work = Callable[[TaskContext], Any]


def store_maker(
    kind: str, folder: Path, request: pytest.FixtureRequest | None = None
) -> Callable[[], TaskStore]:
    """Makes instances of one store of ``kind``: a new in-memory store each call, or one
    SQLite file under ``folder``, or one fresh namespace of the session's ``redis_server``
    (taken through ``request``), which every instance made shares."""
    if kind == "memory":
        return InMemoryTaskStore
    if kind == "sqlite":
        return lambda: SqliteTaskStore(folder / "tasks.db")
    if kind != "redis" or request is None:
        raise ValueError(f"no store {kind!r} (one of {', '.join(STORES)}; redis needs request)")
    from mcp_tasks.runtime.stores.redis import RedisTaskStore
    from testkit.redis_fixtures import unique_namespace

    url, ns = request.getfixturevalue("redis_server").url, unique_namespace()
    return lambda: RedisTaskStore(url, namespace=ns)


class Clock:
    """The engine's clock, set by the test (``clock.now += 61``)."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=STORES)
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], TaskStore]:
    return store_maker(request.param, tmp_path, request)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@asynccontextmanager
async def engine_on(store: TaskStore, **cfg: Any) -> AsyncIterator[TaskEngine]:
    """An engine on ``store`` with the config ``cfg``, running; the store closed after."""
    try:
        async with TaskEngine(store, EngineConfig(**cfg)) as engine:
            yield engine
    finally:
        await store.close()


@pytest.fixture
def make_engine(store_factory: Callable[[], TaskStore], clock: Clock) -> Callable[..., TaskEngine]:
    def make(**kw: Any) -> TaskEngine:
        hooks = {k: kw.pop(k) for k in ("on_status",) if k in kw}
        kw.setdefault("sweep_interval_s", 3600)
        return TaskEngine(store_factory(), EngineConfig(**kw), clock=clock, **hooks)

    return make


@pytest.fixture
async def engine(make_engine: Callable[..., TaskEngine]) -> AsyncIterator[TaskEngine]:
    async with make_engine() as eng:
        yield eng
    await eng.store.close()


def gate() -> tuple[anyio.Event, Work]:
    """A work that waits for the test to release it, then returns a fixed result."""
    ev = anyio.Event()

    async def work(tc: TaskContext) -> dict[str, Any]:
        await ev.wait()
        return {"content": [{"type": "text", "text": "done"}], "isError": False}

    return ev, work


def started_gate() -> tuple[anyio.Event, anyio.Event, Work]:
    """A work that says it started (``started``), then waits for the test to release it."""
    started, release = anyio.Event(), anyio.Event()

    async def work(tc: TaskContext) -> dict[str, Any]:
        started.set()
        await release.wait()
        return {"content": [{"type": "text", "text": "done"}], "isError": False}

    return started, release, work


async def instant(tc: TaskContext) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": "ok"}]}


async def call(eng: TaskEngine, method: str, ctx: RequestContext = ALICE, **params: Any) -> Any:
    return await handle(eng, method, params, ctx)


async def wait_status(
    eng: TaskEngine, tid: str, status: str, ctx: RequestContext = ALICE
) -> dict[str, Any]:
    task: dict[str, Any] = await until_async(
        lambda: call(eng, "tasks/get", ctx, taskId=tid),
        satisfied=lambda t: t["status"] == status,
        what=f"task {tid} {status}",
    )
    return task


async def wound_down(eng: TaskEngine) -> None:
    """Every run of ``eng`` ended (a shared store may wake a waiter a moment before)."""
    await until_async(lambda: not eng.running, what="every run wound down")


def waiting_on(eng: TaskEngine, tid: str) -> int:
    """How many ``tasks/result`` calls wait on the signal of ``tid``'s run."""
    return len(eng.runs.active[tid].changed._event._waiters)  # type: ignore[attr-defined]


async def expect_error(coro: Any, code: int, message: str | None = None) -> TaskError:
    with pytest.raises(TaskError) as info:
        await coro
    assert info.value.code == code, info.value.message
    if message is not None:
        assert info.value.message == message
    return info.value
