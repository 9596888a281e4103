"""Text a store cannot take as it is (a lone surrogate such as ``"\\ud800"``, which JSON
can carry but UTF-8 cannot) is never a store failure: a task ID with one is unknown
(``-32602``, R-ERR-1, X-GET-8, X-CAN-4) without asking the store; a result carrying one
is stored escaped and comes back as it was (R-RESULT-1, X-GET-9); a status message with
one is stored with U+FFFD in its place. On every store, both faces."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from mcp_tasks.core.meta import RELATED_TASK_KEY
from mcp_tasks.errors import TaskError
from mcp_tasks.runtime import (
    InMemoryTaskStore,
    TaskContext,
)
from mcp_tasks.store import TaskStore
from testkit.blinks import CORE, EXTENSION, FACES, Face, runtime_logs
from testkit.engine_kit import engine_on
from testkit.wait import until_async

pytestmark = pytest.mark.anyio

LONE = "\ud800"


@pytest.fixture
def store(store_factory: Callable[[], TaskStore]) -> TaskStore:
    return store_factory()


@pytest.mark.parametrize("face", FACES)
async def test_task_id_with_a_lone_surrogate_is_unknown_R_ERR_1_X_GET_8(
    store: TaskStore, face: str
) -> None:
    with runtime_logs() as logs:
        async with engine_on(store, sweep_interval_s=3600) as engine:
            f = Face(engine, face)
            for method in (f.get, f.cancel):
                with pytest.raises(TaskError) as err:
                    await method(f"abc{LONE}")
                assert err.value.code == -32602, err.value.to_error()
                assert err.value.message == "Failed to retrieve task: Task not found"
    assert logs.lines == []  # no store failure logged


@pytest.mark.parametrize("face", FACES)
async def test_result_with_a_lone_surrogate_is_kept_as_it_was_R_RESULT_1_X_GET_9(
    store: TaskStore, face: str
) -> None:
    result = {"content": [{"type": "text", "text": f"odd {LONE} text"}], "isError": False}

    async def work(tc: TaskContext) -> dict[str, Any]:
        await tc.set_status_message(f"half{LONE}way")
        return result

    with runtime_logs() as logs:
        async with engine_on(store, sweep_interval_s=3600) as engine:
            f = Face(engine, face)
            tid = await f.start(work)
            got = await f.ended(tid)
            assert got["status"] == "completed", got
            if face == CORE:
                assert await f.result(tid) == {
                    **result,
                    "_meta": {RELATED_TASK_KEY: {"taskId": tid}},
                }
            else:
                assert got["result"] == result
    assert logs.lines == []


async def test_status_message_with_a_lone_surrogate_is_stored_replaced(store: TaskStore) -> None:
    import anyio

    release = anyio.Event()

    async def work(tc: TaskContext) -> dict[str, Any]:
        await tc.set_status_message(f"half{LONE}way")
        await release.wait()
        return {"content": []}

    async with engine_on(store, sweep_interval_s=3600) as engine:
        f = Face(engine, CORE)
        tid = await f.start(work)
        seen = await until_async(
            lambda: f.get(tid), satisfied=lambda g: g.get("statusMessage"), what="the message"
        )
        assert seen["statusMessage"] in (f"half{LONE}way", "half\ufffdway")
        release.set()
        assert (await f.ended(tid))["status"] == "completed"


@pytest.mark.parametrize("face", [CORE, EXTENSION])
async def test_unencodable_result_fails_the_task_saying_why_R_STATE_4(
    store: TaskStore, face: str
) -> None:
    """An outcome that is not JSON at all (NaN) cannot be stored on any store that encodes:
    the task ends ``failed`` saying why, never ``working`` for ever."""

    async def work(tc: TaskContext) -> dict[str, Any]:
        return {"content": [], "structuredContent": {"x": float("nan")}}

    async with engine_on(store, sweep_interval_s=3600) as engine:
        f = Face(engine, face)
        tid = await f.start(work)
        got = await f.ended(tid)
        if isinstance(store, InMemoryTaskStore):
            return  # kept as given: nothing is encoded in memory
        assert got["status"] == "failed", got
        assert "could not be stored" in got["statusMessage"] and "JSON" in got["statusMessage"]
