"""Helpers of the store-blink tests: both faces' default handlers on one engine, work held
at a gate, the runtime's warnings watched, and a lock on an SQLite file held by another
process (stopped by PID).

A task's work here answers its own task ID as text, so every task's end can be checked
exactly afterwards: ``completed`` with exactly that result, on either face."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio

from mcp_tasks.core.handlers import RequestContext
from mcp_tasks.core.meta import RELATED_TASK_KEY
from mcp_tasks.errors import TaskError
from mcp_tasks.extension import protocol as ext
from mcp_tasks.runtime import CoreTasks, ExtensionTasks, TaskContext, TaskEngine
from mcp_tasks.store import TaskRecord, TaskStore
from testkit.procs import stop_process
from testkit.wait import until_async

CORE, EXTENSION = "core", "extension"
FACES = (CORE, EXTENSION)
TERMINAL = frozenset({"completed", "failed", "cancelled"})
UNAVAILABLE = "Task store unavailable"


def context(face: str, requestor: str = "alice") -> RequestContext:
    """A request of ``requestor`` on ``face`` (the extension's declares it: X-CAP-1)."""
    if face == CORE:
        return RequestContext(requestor=requestor)
    caps = {"extensions": {ext.EXTENSION_ID: {}}}
    return RequestContext(requestor=requestor, meta={ext.CLIENT_CAPABILITIES_META_KEY: caps})


def result_of(task_id: str) -> dict[str, Any]:
    """What the work of ``task_id`` returns (the tool's ``CallToolResult``)."""
    return {"content": [{"type": "text", "text": f"done {task_id}"}], "isError": False}


class Face:
    """One face's default handler over ``engine``: start a task, read it, its end."""

    def __init__(self, engine: TaskEngine, name: str, requestor: str = "alice") -> None:
        self.engine = engine
        self.name = name
        self.ctx = context(name, requestor)
        self.handler = CoreTasks(engine) if name == CORE else ExtensionTasks(engine)

    async def start(self, work: Callable[[Any], Awaitable[dict[str, Any]]], **task: Any) -> str:
        """The new task's ID (``task``: the core face's ``task`` param, e.g. ``ttl``)."""
        params: dict[str, Any] = {"name": "job"}
        if self.name == CORE:
            params["task"] = task
        created = await self.handler.dispatch_augmented("tools/call", params, self.ctx, work=work)
        return str(created["task"]["taskId"] if self.name == CORE else created["taskId"])

    async def get(self, task_id: str) -> dict[str, Any]:
        """The ``tasks/get`` answer."""
        return await self.handler.dispatch("tasks/get", {"taskId": task_id}, self.ctx)

    async def cancel(self, task_id: str) -> dict[str, Any]:
        return await self.handler.dispatch("tasks/cancel", {"taskId": task_id}, self.ctx)

    async def result(self, task_id: str) -> dict[str, Any]:
        """The core face's ``tasks/result`` (blocks until the task ends, R-RESULT-2)."""
        return await self.handler.dispatch("tasks/result", {"taskId": task_id}, self.ctx)

    async def ended(self, task_id: str, timeout: float = 60) -> dict[str, Any]:
        """``tasks/get`` once terminal, polled (a store that blinks answers "Task store
        unavailable" meanwhile: not yet)."""

        async def probe() -> dict[str, Any] | None:
            try:
                return await self.get(task_id)
            except TaskError as exc:
                if exc.message != UNAVAILABLE:
                    raise
                return None

        got = await until_async(
            probe,
            timeout,
            satisfied=lambda g: g is not None and g["status"] in TERMINAL,
            interval=0.05,
            what=f"task {task_id} ends",
        )
        assert got is not None
        return got

    async def assert_completed_exactly(self, task_id: str) -> None:
        """Completed with exactly its work's result, on this face's wire (R-RESULT-1,
        X-GET-9)."""
        got = await self.ended(task_id)
        assert got["status"] == "completed", (task_id, got)
        if self.name == CORE:
            answer = await self.result(task_id)
            assert answer == {
                **result_of(task_id),
                "_meta": {RELATED_TASK_KEY: {"taskId": task_id}},
            }
        else:
            assert got["result"] == result_of(task_id)


def count_reads(store: TaskStore) -> Counter[str]:
    """Reads of ``store`` that answered, by task ID (so a test knows a ``tasks/result`` has
    read its task before the store blinks); the store itself is unchanged."""
    reads: Counter[str] = Counter()
    inner = store.get

    async def get(task_id: str) -> TaskRecord | None:
        rec = await inner(task_id)
        reads[task_id] += 1
        return rec

    store.get = get  # type: ignore[method-assign]
    return reads


class Gate:
    """Work that waits for ``release``, then answers ``result_of`` its task; counts how many
    works started and returned."""

    def __init__(self) -> None:
        self.release = anyio.Event()
        self.started = 0
        self.returned = 0

    async def work(self, tc: TaskContext) -> dict[str, Any]:
        self.started += 1
        await self.release.wait()
        self.returned += 1
        return result_of(tc.task_id)


class Logs(logging.Handler):
    """The runtime's warnings and errors (logger ``mcp_tasks`` and below), as text."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.name}: {record.getMessage()}")

    def mentions(self, text: str) -> bool:
        return any(text in line for line in self.lines)


@contextmanager
def runtime_logs() -> Iterator[Logs]:
    logs = Logs()
    logger = logging.getLogger("mcp_tasks")
    logger.addHandler(logs)
    try:
        yield logs
    finally:
        logger.removeHandler(logs)


#: Another process takes the write lock of an SQLite file and holds it until its stdin ends.
_LOCKER = (
    "import sqlite3, sys\n"
    "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
    "c.execute('PRAGMA busy_timeout=30000')\n"
    "c.execute('BEGIN EXCLUSIVE')\n"
    "print('locked', flush=True)\n"
    "sys.stdin.read()\n"
)


class SqliteLock:
    """``BEGIN EXCLUSIVE`` on ``path`` in another process, from ``take`` until ``release``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.proc: subprocess.Popen[bytes] | None = None

    def take_now(self) -> None:
        """Take the lock; return once it is held (blocks: for threads)."""
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _LOCKER, str(self.path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        stdout = self.proc.stdout
        assert stdout is not None
        line = stdout.readline()
        assert line == b"locked\n", line

    async def take(self) -> None:
        """:meth:`take_now`, for async tests."""
        await anyio.to_thread.run_sync(self.take_now)

    def release(self) -> None:
        proc, self.proc = self.proc, None
        stop_process(proc, grace=10)  # by PID: its transaction rolls back
