"""EngineConfig is checked when built; the schema decides whether ttl may be unlimited;
the audit trail is quiet unless asked for; a requestor's tasks can be cancelled at once."""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner

from mcp_tasks.core.handlers import RequestContext
from mcp_tasks.errors import StoreUnavailable
from mcp_tasks.protocol import (
    CANCELLED,
    COMPLETED,
    TASKS_CANCEL,
    TASKS_GET,
    TASKS_LIST,
    TASKS_RESULT,
    TOOLS_CALL,
    TTL_NULLABLE,
)
from mcp_tasks.runtime import EngineConfig, InMemoryTaskStore, TaskContext, TaskEngine
from mcp_tasks.store import TaskRecord
from mcptask_gen.cli import main as generate
from testkit.core_calls import create_task, handle
from testkit.importing import imported
from testkit.wait import until_async

REPO = Path(__file__).resolve().parents[2]
SCHEMA_ORIGINAL = REPO / "schema" / "2025-11-25-original" / "schema.json"
ALICE = RequestContext(requestor="alice")
BOB = RequestContext(requestor="bob")


async def forever(tc: TaskContext) -> dict[str, Any]:
    await anyio.sleep_forever()
    return {}


async def instant(tc: TaskContext) -> dict[str, Any]:
    return {"content": []}


# ---------------------------------------------------------------- construction checks


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("page_size", 0, ValueError),
        ("page_size", "50", TypeError),
        ("max_active_per_requestor", -1, ValueError),
        ("rate_limit_calls", True, TypeError),
        ("rate_limit_window_s", 0, ValueError),
        ("sweep_interval_s", float("nan"), ValueError),
        ("max_ttl_ms", 1.5, TypeError),
        ("default_ttl_ms", -5, ValueError),
        ("poll_interval_ms", "500", TypeError),
        ("input_claim_s", -1.0, ValueError),
        ("allow_unlimited_ttl", 1, TypeError),
        ("cursor_secret", 12345, TypeError),
        ("cursor_secret", b"", ValueError),
        ("outcome_retry_s", 0, ValueError),
        ("outcome_retry_max_s", "5", TypeError),
        ("outcome_retry_max_s", 0.01, ValueError),  # below outcome_retry_s
        ("keep_running_tasks", "yes", TypeError),
        ("renew_ahead_s", float("inf"), ValueError),
        ("max_tasks_total", 999, ValueError),  # below max_tasks_per_requestor
        ("max_tasks_total", "100000", TypeError),
        ("max_result_bytes_total", 1 << 20, ValueError),  # below the per-requestor bytes
    ],
)
def test_bad_config_is_refused_at_construction_R_SEC_4(
    field: str, value: Any, error: type[Exception]
) -> None:
    with pytest.raises(error, match=f"EngineConfig.{field}"):
        EngineConfig(**{field: value})


def test_outcome_backoff_and_renewal_lead() -> None:
    """Kept outcomes are written again after 0.1 s, then twice as long each time, at most
    5 s apart; a running task's ttl is renewed ahead of its expiry by ``renew_ahead_s``, at
    least two sweeps (a renewal must come before any sweep would expire it)."""
    cfg = EngineConfig()
    assert [cfg.retry_delay_s(n) for n in (1, 2, 3, 7, 1000)] == [0.1, 0.2, 0.4, 5.0, 5.0]
    assert cfg.renew_lead_s == 10.0
    assert EngineConfig(sweep_interval_s=30).renew_lead_s == 60.0


@pytest.mark.anyio
async def test_str_cursor_secret_is_accepted_R_LIST_2() -> None:
    """A str secret is used as UTF-8: it signs exactly like the same bytes."""
    cfg = EngineConfig(cursor_secret="a str secret", page_size=1)
    assert cfg.cursor_secret == b"a str secret"
    async with (
        TaskEngine(config=cfg) as a,
        TaskEngine(config=EngineConfig(cursor_secret=b"a str secret", page_size=1)) as b,
    ):
        for _ in range(2):
            await create_task(a, ALICE, TOOLS_CALL, instant)
        first = await handle(a, "tasks/list", {}, ALICE)
        rest = await handle(a, "tasks/list", {"cursor": first["nextCursor"]}, ALICE)
        assert len(rest["tasks"]) == 1
        # the same secret as bytes verifies the cursor too
        assert (await handle(b, "tasks/list", {"cursor": first["nextCursor"]}, ALICE))[
            "tasks"
        ] == []


# ---------------------------------------------------------------- ttl against the schema


@pytest.fixture(scope="module")
def original_pkg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A package generated from the original 2025-11-25 schema (``Task.ttl`` not nullable)."""
    if not SCHEMA_ORIGINAL.is_file():
        pytest.skip(f"{SCHEMA_ORIGINAL} is not available")
    root = tmp_path_factory.mktemp("gen")
    old = os.environ.get("MCPTASK_GEN_CACHE_DIR")
    os.environ["MCPTASK_GEN_CACHE_DIR"] = str(root / "cache")
    try:
        out = root / "mcp_tasks_original"
        result = CliRunner().invoke(
            generate, [str(SCHEMA_ORIGINAL), "-o", str(out), "--with-runtime"]
        )
        assert result.exit_code == 0, result.output
    finally:
        if old is None:
            os.environ.pop("MCPTASK_GEN_CACHE_DIR", None)
        else:
            os.environ["MCPTASK_GEN_CACHE_DIR"] = old
    with imported(root, "mcp_tasks_original") as pkg:  # from its directory, not sys.path
        importlib.import_module("mcp_tasks_original.runtime")
        yield pkg


def test_pinned_schema_allows_unlimited_ttl_R_TTL_2() -> None:
    assert TTL_NULLABLE is True
    assert EngineConfig(allow_unlimited_ttl=True).allow_unlimited_ttl


def test_unlimited_ttl_refused_when_schema_forbids_it_R_TTL_2(original_pkg: Any) -> None:
    assert original_pkg.protocol.TTL_NULLABLE is False
    config_cls = original_pkg.runtime.EngineConfig
    with pytest.raises(ValueError, match="does not allow an unlimited ttl"):
        config_cls(allow_unlimited_ttl=True)
    # without it, a default of None means the maximum
    assert config_cls(default_ttl_ms=None).default_ttl_ms == config_cls().max_ttl_ms


@pytest.mark.anyio
async def test_null_ttl_is_clamped_and_answers_stay_valid_R_TTL_2(original_pkg: Any) -> None:
    rt = original_pkg.runtime
    ctx = importlib.import_module("mcp_tasks_original.core.handlers").RequestContext(
        requestor="alice"
    )
    async with rt.TaskEngine(config=rt.EngineConfig(max_ttl_ms=60_000)) as engine:
        core = rt.CoreTasks(engine)
        created = await core.dispatch_augmented(
            original_pkg.protocol.TOOLS_CALL, {"task": {"ttl": None}}, ctx, work=instant
        )
        assert created["task"]["ttl"] == 60_000
        tid = created["task"]["taskId"]
        got = await core.dispatch("tasks/get", {"taskId": tid}, ctx)
        assert got["ttl"] == 60_000
        listed = await core.dispatch("tasks/list", {}, ctx)
        assert [t["taskId"] for t in listed["tasks"]] == [tid]


# ---------------------------------------------------------------- audit trail


@pytest.mark.anyio
async def test_audit_is_quiet_unless_asked_for_R_SEC_5(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)  # e.g. a server that logs INFO at the root
    async with TaskEngine() as engine:
        tid = (await create_task(engine, ALICE, TOOLS_CALL, instant))["task"]["taskId"]
        await handle(engine, "tasks/get", {"taskId": tid}, ALICE)
    assert not [r for r in caplog.records if r.name == "mcp_tasks.audit"]
    logging.getLogger("mcp_tasks.audit").setLevel(logging.INFO)  # the documented switch
    try:
        async with TaskEngine() as engine:
            tid = (await create_task(engine, ALICE, TOOLS_CALL, instant))["task"]["taskId"]
            await handle(engine, "tasks/get", {"taskId": tid}, ALICE)
    finally:
        logging.getLogger("mcp_tasks.audit").setLevel(logging.WARNING)
    events = [
        getattr(r, "audit_event", None) for r in caplog.records if r.name == "mcp_tasks.audit"
    ]
    assert "created" in events and "retrieved" in events


# ---------------------------------------------------------------- cancelling a requestor's tasks


@pytest.mark.anyio
async def test_cancel_requestor_tasks_R_CANCEL_2() -> None:
    statuses: list[tuple[str, str]] = []

    async def on_status(rec: TaskRecord) -> None:
        statuses.append((rec.requestor, rec.status.value))

    async with TaskEngine(config=EngineConfig(page_size=2), on_status=on_status) as engine:
        running = [
            (await create_task(engine, ALICE, TOOLS_CALL, forever))["task"]["taskId"]
            for _ in range(3)
        ]
        done = (await create_task(engine, ALICE, TOOLS_CALL, instant))["task"]["taskId"]
        bobs = (await create_task(engine, BOB, TOOLS_CALL, forever))["task"]["taskId"]
        await handle(engine, "tasks/result", {"taskId": done}, ALICE)
        assert await engine.cancel_requestor_tasks("alice", "The session ended") == 3
        for tid in running:
            got = await handle(engine, "tasks/get", {"taskId": tid}, ALICE)
            assert got["status"] == CANCELLED.value
            assert got["statusMessage"] == "The session ended"
        assert (await handle(engine, "tasks/get", {"taskId": done}, ALICE))["status"] == (
            COMPLETED.value
        )
        assert (await handle(engine, "tasks/get", {"taskId": bobs}, BOB))["status"] != (
            CANCELLED.value
        )
        # the cancelled works wind down; only bob's still runs
        await until_async(lambda: engine.running == 1, what="only bob's work runs")
        assert statuses.count(("alice", CANCELLED.value)) == 3
        assert await engine.cancel_requestor_tasks("alice", "again") == 0
        assert await engine.cancel_requestor_tasks("nobody", "x") == 0


# ---------------------------------------------------------------- one place for store failures


class _Broken(InMemoryTaskStore):
    """Every read or write after ``broken = True`` fails the way a backend would."""

    broken = False

    async def get(self, task_id: str) -> Any:
        if self.broken:
            raise OSError("disk")
        return await super().get(task_id)

    async def list_tasks(self, requestor: str, *, after: Any, limit: int) -> Any:
        if self.broken:
            raise OSError("disk")
        return await super().list_tasks(requestor, after=after, limit=limit)

    async def count_active(self, requestor: str) -> int:
        if self.broken:
            raise ConnectionError("gone")
        return await super().count_active(requestor)

    async def transition(self, task_id: str, status: Any, **kw: Any) -> Any:
        if self.broken:
            raise OSError("disk")
        return await super().transition(task_id, status, **kw)


@pytest.mark.anyio
async def test_every_store_failure_answers_store_unavailable_R_ERR_1(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = _Broken()
    async with TaskEngine(store) as engine:
        tid = (await create_task(engine, ALICE, TOOLS_CALL, forever))["task"]["taskId"]
        store.broken = True
        calls = [
            handle(engine, TASKS_GET, {"taskId": tid}, ALICE),
            handle(engine, TASKS_RESULT, {"taskId": tid}, ALICE),
            handle(engine, TASKS_CANCEL, {"taskId": tid}, ALICE),
            handle(engine, TASKS_LIST, {}, ALICE),
            create_task(engine, ALICE, TOOLS_CALL, instant),
            engine.cancel_requestor_tasks("alice", "gone"),
        ]
        for coro in calls:
            with pytest.raises(StoreUnavailable) as info:
                await coro
            # a plain, client-safe message; what failed is in the server log
            assert info.value.to_error() == StoreUnavailable().to_error()
        assert any("OSError: disk" in r.getMessage() for r in caplog.records)
        store.broken = False
        assert (await handle(engine, TASKS_GET, {"taskId": tid}, ALICE))["taskId"] == tid


def test_totals_follow_a_raised_per_requestor_cap_R_SEC_4() -> None:
    """A requestor's caps raised above the server-wide defaults raise those with them (a
    config that ran before the totals existed still starts); totals given stay as given."""
    cfg = EngineConfig(max_tasks_per_requestor=1_000_000, max_result_bytes_per_requestor=2 << 30)
    assert (cfg.max_tasks_total, cfg.max_result_bytes_total) == (1_000_000, 2 << 30)
    default = EngineConfig()
    assert (default.max_tasks_total, default.max_result_bytes_total) == (100_000, 1 << 30)
    given = EngineConfig(max_tasks_total=5_000, max_result_bytes_total=1 << 27)
    assert (given.max_tasks_total, given.max_result_bytes_total) == (5_000, 1 << 27)
