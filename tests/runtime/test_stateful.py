"""Hypothesis stateful test: random create/complete/fail/cancel/get/result/list/expire
sequences against the engine over both stores, checking the spec's invariants after
every step (R-STATE-1..3, R-RESULT-1, R-RESULT-4, R-CANCEL-1, R-CANCEL-3, R-LIST-1,
R-LIST-3, R-TTL-2, R-TTL-3, R-SEC-1)."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.from_thread import start_blocking_portal
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, rule

from mcp_tasks.core.handlers import RequestContext
from mcp_tasks.core.meta import RELATED_TASK_KEY
from mcp_tasks.errors import JsonRpcError, TaskError
from mcp_tasks.runtime import (
    EngineConfig,
    InMemoryTaskStore,
    SqliteTaskStore,
    TaskContext,
    TaskEngine,
)
from testkit.core_calls import create_task, handle

USERS = [RequestContext(requestor="alice"), RequestContext(requestor="bob")]
TERMINAL = {"completed", "failed", "cancelled"}


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


class EngineMachine(RuleBasedStateMachine):
    store_kind = "memory"
    tasks = Bundle("tasks")

    def __init__(self) -> None:
        super().__init__()
        self._portal_cm = start_blocking_portal()
        self.portal = self._portal_cm.__enter__()
        self._tmp = tempfile.TemporaryDirectory()
        store = (
            InMemoryTaskStore()
            if self.store_kind == "memory"
            else SqliteTaskStore(Path(self._tmp.name) / "t.db")
        )
        self.clock = Clock()
        self.engine = TaskEngine(
            store,
            EngineConfig(
                page_size=3,
                max_active_per_requestor=1000,
                rate_limit_calls=10**9,
                sweep_interval_s=3600,
            ),
            clock=self.clock,
        )
        self._engine_cm = self.portal.wrap_async_context_manager(self.engine)
        self._engine_cm.__enter__()
        # model: task id -> dict(owner, status, key, expires, outcome)
        self.model: dict[str, dict[str, Any]] = {}
        self.outcomes: dict[str, Any] = {}
        self.gates: dict[str, anyio.Event] = {}

    def teardown(self) -> None:
        try:
            self._engine_cm.__exit__(None, None, None)
            self.portal.call(self.engine.store.close)
        finally:
            self._portal_cm.__exit__(None, None, None)
            self._tmp.cleanup()

    def call(self, method: str, ctx: RequestContext, **params: Any) -> Any:
        return self.portal.call(handle, self.engine, method, params, ctx)

    def error_of(self, method: str, ctx: RequestContext, **params: Any) -> TaskError:
        with pytest.raises(TaskError) as info:
            self.call(method, ctx, **params)
        return info.value

    # ------------------------------------------------------------------ rules

    @rule(target=tasks, user=st.integers(0, 1), ttl=st.sampled_from([None, 1000, 5000, 10**15]))
    def create(self, user: int, ttl: int | None) -> str:
        ctx = USERS[user]

        async def go() -> dict[str, Any]:
            gate = anyio.Event()

            async def work(tc: TaskContext) -> dict[str, Any]:
                await gate.wait()
                kind, value = self.outcomes[tc.task_id]
                if kind == "raise":
                    raise JsonRpcError(**value)
                return dict(value)

            created = await create_task(
                self.engine, ctx, "tools/call", work, task=None if ttl is None else {"ttl": ttl}
            )
            self.gates[created["task"]["taskId"]] = gate
            return created

        self._advance(0.001)  # creation times in order
        created = self.portal.call(go)
        task = created["task"]
        tid = task["taskId"]
        assert task["status"] == "working"  # R-STATE-1
        actual = {None: 3_600_000, 10**15: 86_400_000}.get(ttl, ttl)
        assert task["ttl"] == actual  # R-TTL-2
        rec = self.portal.call(self.engine.store.get, tid)
        assert rec is not None
        self.model[tid] = {
            "owner": ctx.requestor,
            "status": "working",
            "key": (rec.created_at, tid),
            "expires": rec.created_at + actual / 1000.0,
            # the work's ttl is renewed while it runs, up to the maximum ttl (R-SEC-4)
            "latest": rec.created_at + self.engine.config.max_ttl_ms / 1000.0,
        }
        return tid

    def _ended(self, tid: str) -> None:
        """The task just became terminal: it expires when the store now says (its ttl from
        creation, or from its end when its work outlived it: R-TTL-2, R-TTL-3)."""
        rec = self.portal.call(self.engine.store.get, tid)
        assert rec is not None and rec.expires_at is not None
        self.model[tid]["expires"] = rec.expires_at

    def _finish(self, tid: str, kind: str, value: dict[str, Any], status: str) -> None:
        m = self.model[tid]
        if m["status"] != "working":
            return
        self.outcomes[tid] = (kind, value)
        self.portal.call(self._release, tid)
        m["status"] = status
        m["outcome"] = (kind, value)
        # wait for the outcome through tasks/result (event-driven)
        ctx = RequestContext(requestor=m["owner"])
        if kind == "raise":
            err = self.error_of("tasks/result", ctx, taskId=tid)
            assert err.code == value["code"] and err.message == value["message"]
        else:
            self.call("tasks/result", ctx, taskId=tid)
        self._ended(tid)

    async def _release(self, tid: str) -> None:
        self.gates[tid].set()

    @rule(tid=tasks, n=st.integers(0, 5))
    def complete(self, tid: str, n: int) -> None:
        self._finish(tid, "ok", {"content": [{"type": "text", "text": f"r{n}"}]}, "completed")

    @rule(tid=tasks)
    def fail_with_error(self, tid: str) -> None:
        self._finish(tid, "raise", {"code": -32001, "message": "nope"}, "failed")

    @rule(tid=tasks)
    def fail_with_is_error(self, tid: str) -> None:
        self._finish(tid, "ok", {"content": [], "isError": True}, "failed")

    @rule(tid=tasks, user=st.integers(0, 1))
    def cancel(self, tid: str, user: int) -> None:
        m = self.model[tid]
        ctx = USERS[user]
        if ctx.requestor != m["owner"] or m["status"] == "expired":
            assert self.error_of("tasks/cancel", ctx, taskId=tid).code == -32602  # R-SEC-1
        elif m["status"] in TERMINAL:
            err = self.error_of("tasks/cancel", ctx, taskId=tid)  # R-CANCEL-1
            assert err.message == f"Cannot cancel task: already in terminal status '{m['status']}'"
        else:
            assert self.call("tasks/cancel", ctx, taskId=tid)["status"] == "cancelled"
            m["status"] = "cancelled"
            self._ended(tid)

    @rule(tid=tasks, user=st.integers(0, 1))
    def result(self, tid: str, user: int) -> None:
        m = self.model[tid]
        ctx = USERS[user]
        if ctx.requestor != m["owner"]:
            err = self.error_of("tasks/result", ctx, taskId=tid)
            assert err.message == "Failed to retrieve task: Task not found"  # R-SEC-1
            return
        if m["status"] == "expired":
            err = self.error_of("tasks/result", ctx, taskId=tid)
            assert err.message == "Failed to retrieve task: Task has expired"
        elif m["status"] == "cancelled":
            assert self.error_of("tasks/result", ctx, taskId=tid).code == -32800
        elif m["status"] in TERMINAL:
            kind, value = m["outcome"]
            if kind == "raise":
                assert self.error_of("tasks/result", ctx, taskId=tid).code == value["code"]
            else:  # R-RESULT-1, R-RESULT-4
                got = self.call("tasks/result", ctx, taskId=tid)
                assert got == {**value, "_meta": {RELATED_TASK_KEY: {"taskId": tid}}}

    @rule(seconds=st.sampled_from([0.5, 2.0, 4.0, 4000.0]))
    def expire(self, seconds: float) -> None:
        self._advance(seconds)
        self.portal.call(self.engine.sweep)

    def _advance(self, seconds: float) -> None:
        """Move the engine's clock; the model's tasks expire with it, whichever rule moved
        it (a creation moves it too: a task may expire a microsecond later)."""
        self.clock.now += seconds
        for m in self.model.values():
            # A task whose work runs is kept (renewed) up to its maximum ttl (R-TTL-3 is a
            # MAY); a terminal one expires at its ttl (R-TTL-3).
            deadline = m["latest"] if m["status"] == "working" else m["expires"]
            if m["status"] != "expired" and deadline <= self.clock.now:
                m["status"] = "expired"

    # ------------------------------------------------------------------ invariants

    @invariant()
    def every_task_matches_the_model(self) -> None:
        for tid, m in self.model.items():
            ctx = RequestContext(requestor=m["owner"])
            if m["status"] == "expired":
                err = self.error_of("tasks/get", ctx, taskId=tid)
                assert err.message == "Failed to retrieve task: Task has expired"
                continue
            t = self.call("tasks/get", ctx, taskId=tid)
            assert t["status"] == m["status"], (tid, t, m)  # R-STATE-2, R-STATE-3, R-CANCEL-3
            assert t["createdAt"] <= t["lastUpdatedAt"]

    @invariant()
    def list_is_exactly_the_live_tasks_in_order(self) -> None:
        for ctx in USERS:
            want = sorted(
                m["key"]
                for m in self.model.values()
                if m["owner"] == ctx.requestor and m["status"] != "expired"
            )
            seen: list[str] = []
            cursor = None
            while True:
                page = self.call(
                    "tasks/list", ctx, **({} if cursor is None else {"cursor": cursor})
                )
                assert len(page["tasks"]) <= 3
                seen += [t["taskId"] for t in page["tasks"]]
                cursor = page.get("nextCursor")
                if cursor is None:
                    break
            assert seen == [k[1] for k in want]  # R-LIST-1, R-LIST-3

    @invariant()
    def active_count_matches(self) -> None:
        for ctx in USERS:
            active = sum(
                1
                for m in self.model.values()
                if m["owner"] == ctx.requestor and m["status"] == "working"
            )
            assert self.portal.call(self.engine.store.count_active, ctx.requestor) == active


class SqliteEngineMachine(EngineMachine):
    store_kind = "sqlite"


SETTINGS = settings(
    max_examples=25,
    stateful_step_count=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestEngineMemory = EngineMachine.TestCase
TestEngineMemory.settings = SETTINGS
TestEngineSqlite = SqliteEngineMachine.TestCase
TestEngineSqlite.settings = SETTINGS
