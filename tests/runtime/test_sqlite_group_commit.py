"""SQLite group commit: concurrent writes share one transaction, each caller returns only
once its write committed (R-CREATE-2, X-CREATE-3: an acknowledged task is durable), one
write's own error does not fail the others, a failed commit fails every caller with the
typed error."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_tasks.errors import StoreUnavailable
from mcp_tasks.protocol import COMPLETED
from mcp_tasks.runtime import SqliteTaskStore
from mcp_tasks.store import TaskRecord
from mcp_tasks.testing.store_conformance import record

pytestmark = pytest.mark.anyio

RESULT = {"content": [{"type": "text", "text": "ok"}]}


def rec(task_id: str) -> TaskRecord:
    """A new task of alice's, created now (the conformance kit's record)."""
    return record(task_id, created_at=time.time())


async def test_concurrent_writes_share_a_batch_and_all_land(tmp_path: Path) -> None:
    store = SqliteTaskStore(tmp_path / "g.db")
    try:
        async with anyio.create_task_group() as tg:
            for i in range(64):
                tg.start_soon(store.create, rec(f"t{i}"))
        errors: list[BaseException] = []

        async def dup() -> None:
            try:
                await store.create(rec("t0"))
            except KeyError as exc:
                errors.append(exc)

        async def done(i: int) -> None:
            assert await store.transition(f"t{i}", COMPLETED, now=time.time(), result=RESULT)

        async with anyio.create_task_group() as tg:
            tg.start_soon(dup)  # fails alone, in the same batch as the transitions
            for i in range(64):
                tg.start_soon(done, i)
        assert len(errors) == 1
        for i in range(64):
            got = await store.get(f"t{i}")
            assert got is not None and got.status == COMPLETED and got.result == RESULT
    finally:
        await store.close()


async def test_failed_batch_fails_each_caller_with_the_typed_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SqliteTaskStore(tmp_path / "f.db")
    real = store._conn
    failures: list[BaseException] = []

    class Broken:
        """The writer connection, with COMMIT failing (a full disk, say)."""

        in_transaction = property(lambda self: real.in_transaction)

        def execute(self, sql: str, *args: Any) -> Any:
            if sql == "COMMIT":
                raise sqlite3.OperationalError("database or disk is full")
            return real.execute(sql, *args)

    monkeypatch.setattr(store, "_conn", Broken())

    async def create(i: int) -> None:
        try:
            await store.create(rec(f"x{i}"))
        except StoreUnavailable as exc:
            failures.append(exc)

    try:
        with anyio.fail_after(10):  # never a hang
            async with anyio.create_task_group() as tg:
                for i in range(16):
                    tg.start_soon(create, i)
        assert len(failures) == 16
        monkeypatch.setattr(store, "_conn", real)
        assert await store.get("x0") is None  # rolled back
        await store.create(rec("x0"))  # the store keeps working
        assert await store.get("x0") is not None
    finally:
        monkeypatch.setattr(store, "_conn", real)
        await store.close()


CHILD = textwrap.dedent("""
    import os, signal, sys, time, anyio
    from mcp_tasks.protocol import COMPLETED, INITIAL, TOOLS_CALL
    from mcp_tasks.runtime import SqliteTaskStore
    from mcp_tasks.store import TaskRecord

    async def main() -> None:
        store = SqliteTaskStore(sys.argv[1])

        async def one(i: int) -> None:
            now = time.time()
            tid = f"k{i}"
            await store.create(TaskRecord(task_id=tid, requestor="alice", method=TOOLS_CALL,
                status=INITIAL, created_at=now, last_updated_at=now, ttl_ms=60_000,
                poll_interval_ms=500))
            print("created", tid, flush=True)
            if i % 2:
                await store.transition(tid, COMPLETED, now=time.time(), result={"n": i})
                print("completed", tid, flush=True)

        async with anyio.create_task_group() as tg:
            for i in range(200):
                tg.start_soon(one, i)
        os.kill(os.getpid(), signal.SIGKILL)  # right after the last acknowledgement

    anyio.run(main)
    """)


async def test_sigkill_loses_no_acknowledged_write(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(db)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    acked = [line.split() for line in proc.stdout.splitlines()]
    assert len(acked) == 300
    store = SqliteTaskStore(db)
    try:
        for what, tid in acked:
            got = await store.get(tid)
            assert got is not None, tid
            if what == "completed":
                assert got.status == COMPLETED
                assert got.result == json.loads(json.dumps({"n": int(tid[1:])}))
    finally:
        await store.close()
