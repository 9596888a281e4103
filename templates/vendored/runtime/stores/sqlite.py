"""``SqliteTaskStore``: durable tasks in one SQLite file (stdlib ``sqlite3``, WAL mode).

Writes use group commit: they queue, and the writes of concurrent tasks are committed
together in one transaction per tick on one writer connection. Each caller returns only
after the transaction holding its write committed (``create`` returning means the task
is durable), and a batch that fails to commit fails each of its callers with
``errors.StoreUnavailable``. One write's own error (a duplicate ID) undoes that write
only: SQLite undoes a failed statement, and a write of several runs in a savepoint.

What a commit costs, and where it runs: in WAL mode with ``synchronous=NORMAL`` a commit
appends the transaction to the write-ahead log without waiting for the disk (no
``fsync``): tens of microseconds, so a batch commits on the event loop itself, which costs
less than a hop to a worker thread. What could make it wait runs elsewhere: when another
process holds the write lock (``mcptask admin cancel``) the batch goes to a worker thread
that waits for it (``busy_timeout``); the log is copied back into the database file
(a checkpoint, which does ``fsync``) by a background thread on a connection of its own
once the store is started, never by a commit. Durability: every committed task and
result survives a killed process; a power cut or an operating-system crash may lose the
transactions committed since the last checkpoint (the database stays consistent), as
SQLite documents for ``synchronous=NORMAL`` in WAL mode (docs/reliability.md).

Reads run inline on a reader connection of their own: in WAL mode a reader never waits
for the writer. ``transition`` is one ``UPDATE ... WHERE status IN (...) RETURNING``: the
compare and the write are one statement (R-CANCEL-3). On start, ``recover`` marks
tasks a dead process left ``working``/``input_required`` as ``failed``.

Another process may open the same file without an engine (``mcptask admin``): its reads
never wait for the writer (WAL), and a cancel it writes is noticed by the serving engine's
sweep (``external_changes``). ``list_all`` reads in a worker thread on a connection of its
own (a filtered listing may scan the table).
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, Unpack

import anyio.to_thread

from ...errors import InternalError, StoreUnavailable
from ...protocol import FAILED, NON_TERMINAL, REVISION, TaskStatus
from ...store import (
    Change,
    TaskPage,
    TaskQuery,
    TaskRecord,
    TaskStore,
    encode_json,
    storable_id,
    storable_text,
    transition_sources,
)
from .batching import GroupSender, Queued

T = TypeVar("T")
log = logging.getLogger(__name__)

_COLUMNS = (
    "task_id, requestor, method, status, created_at, last_updated_at, ttl_ms, "
    "poll_interval_ms, status_message, result, error, version, face, tool"
)
_SCHEMA = """
CREATE TABLE IF NOT EXISTS tasks (
    task_id TEXT PRIMARY KEY,
    requestor TEXT NOT NULL,
    method TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at REAL NOT NULL,
    last_updated_at REAL NOT NULL,
    ttl_ms INTEGER,
    expires_at REAL,
    poll_interval_ms INTEGER,
    status_message TEXT,
    result TEXT,
    error TEXT,
    version INTEGER NOT NULL DEFAULT 0,
    face TEXT NOT NULL,
    tool TEXT
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS tasks_by_requestor ON tasks (requestor, created_at, task_id);
CREATE INDEX IF NOT EXISTS tasks_by_expiry ON tasks (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS tasks_active ON tasks (requestor, status);
CREATE INDEX IF NOT EXISTS tasks_by_created ON tasks (created_at, task_id);
"""
_ACTIVE = tuple(s.value for s in sorted(NON_TERMINAL))
#: How long a write waits for another process's write lock (in a worker thread), ms.
_BUSY_MS = 5000
#: The longest time between two checkpoints of a started store's log, seconds.
_CHECKPOINT_S = 10.0
_INSERT_COLUMNS = (
    "INSERT INTO tasks (task_id, requestor, method, status, created_at, last_updated_at, "
    "ttl_ms, expires_at, poll_interval_ms, status_message, result, error, version, face, tool) "
)
_INSERT = _INSERT_COLUMNS + "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
#: The insert, only while the requestor has fewer than the last parameter active tasks.
_INSERT_LIMITED = (
    _INSERT_COLUMNS + "SELECT ?,?,?,?,?,?,?,?,?,?,?,?,?,?,? WHERE (SELECT COUNT(*) FROM tasks "
    f"WHERE requestor = ? AND status IN ({','.join('?' * len(_ACTIVE))})) < ?"
)
#: Files made before tasks had a face: their tasks are all of the first face.
_ADD_FACE = f"ALTER TABLE tasks ADD COLUMN face TEXT NOT NULL DEFAULT '{REVISION}'"
#: Files made before tasks kept their tool: those tasks have none (NULL).
_ADD_TOOL = "ALTER TABLE tasks ADD COLUMN tool TEXT"


def _migrate(c: sqlite3.Connection) -> None:
    """Bring a file made by an older version up to this schema (idempotent)."""
    columns = {row[1] for row in c.execute("PRAGMA table_info(tasks)")}
    if "face" not in columns:
        c.execute(_ADD_FACE)
    if "tool" not in columns:
        c.execute(_ADD_TOOL)


class _Write(Queued):
    """One queued write: the function; its outcome is the function's once its batch
    committed."""

    __slots__ = ("fn", "steps")

    def __init__(self, fn: Callable[[sqlite3.Connection], Any], steps: int) -> None:
        super().__init__()
        self.fn = fn
        #: Statements that write: a write of one needs no savepoint (SQLite undoes a
        #: failed statement by itself, keeping the transaction).
        self.steps = steps


#: Commits between two checkpoints of the write-ahead log (a started store's, off the
#: request path): about SQLite's own default of 1,000 pages, at a page or two a commit.
_CHECKPOINT_EVERY = 500


def _commit(c: sqlite3.Connection, batch: list[_Write], begun: bool = False) -> None:
    """Run ``batch`` in one transaction (the caller holds the lock; ``begun``: the
    transaction is open already)."""
    if not begun:
        c.execute("BEGIN IMMEDIATE")
    try:
        for w in batch:
            if w.steps > 1:
                c.execute("SAVEPOINT w")
            try:
                w.value = w.fn(c)
            except Exception as exc:  # the write's own answer (e.g. KeyError)
                if not c.in_transaction:
                    raise  # SQLite rolled the whole transaction back
                if w.steps > 1:
                    c.execute("ROLLBACK TO w")
                w.exc = exc
            if w.steps > 1:
                c.execute("RELEASE w")
        c.execute("COMMIT")
    except BaseException:
        if c.in_transaction:
            c.execute("ROLLBACK")
        raise


def _row(row: tuple[Any, ...]) -> TaskRecord:
    return TaskRecord(
        task_id=row[0],
        requestor=row[1],
        method=row[2],
        status=TaskStatus(row[3]),
        created_at=row[4],
        last_updated_at=row[5],
        ttl_ms=row[6],
        poll_interval_ms=row[7],
        status_message=row[8],
        result=None if row[9] is None else json.loads(row[9]),
        error=None if row[10] is None else json.loads(row[10]),
        version=row[11],
        face=row[12],
        tool=row[13],
    )


class SqliteTaskStore(TaskStore, GroupSender[_Write]):
    """Tasks and results in an SQLite database file (``":memory:"`` works too, not durably)."""

    #: ``mcptask admin cancel`` may write the file from another process.
    external_changes = True
    #: concurrent writes share one commit (group commit)
    batches = True

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        with self._lock:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute(f"PRAGMA busy_timeout={_BUSY_MS}")
            self._conn.executescript(_SCHEMA)
            _migrate(self._conn)
            # A commit on the event loop never waits for the lock: a busy file sends the
            # batch to a worker thread, which waits (``_flush``).
            self._conn.execute("PRAGMA busy_timeout=0")
        self._closed = False
        #: commits since the last checkpoint, and the checkpointer's wake-up (``start``)
        self._commits = 0
        self._checkpoint_due: anyio.Event | None = None
        GroupSender.__init__(self)
        # Reads run inline with a connection of their own: in WAL mode a reader never waits
        # for the writer, and a hop to a worker thread costs several times a keyed SELECT.
        # Writes stay on the worker thread. ":memory:" is one database per connection, so it
        # reads through the writer.
        self._reader: sqlite3.Connection | None = None
        if self.path not in ("", ":memory:"):
            self._reader = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._reader.execute("PRAGMA busy_timeout=5000")
            self._reader.execute("PRAGMA query_only=1")

    async def _call(self, fn: Callable[[sqlite3.Connection], T], steps: int = 1) -> T:
        """Queue the write ``fn``; return once the transaction holding it committed (group
        commit, :class:`~.batching.GroupSender`: a cancelled caller's write, once queued,
        still commits, as a write in a thread would)."""
        return await self._enqueue(_Write(fn, steps))  # type: ignore[no-any-return]

    async def _flush(self, batch: list[_Write]) -> None:
        """Commit ``batch`` on the event loop when the writer is free and the file's write
        lock can be had at once; else in a worker thread that waits for them."""
        if self._lock.acquire(blocking=False):
            try:
                if self._begin():
                    self._commit_batch(batch, begun=True)
                    return
            finally:
                self._lock.release()
        await anyio.to_thread.run_sync(self._commit_waiting, batch)

    def _begin(self) -> bool:
        """Open the batch's transaction if nothing holds the file's write lock (the caller
        holds ``_lock``): False when busy (or closed: the thread answers that)."""
        if self._closed:
            return False
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:
            return False  # locked by another connection: the thread waits for it
        return True

    def _commit_waiting(self, batch: list[_Write]) -> None:
        """``_commit_batch`` in a worker thread, waiting up to ``busy_timeout`` for the
        file's write lock."""
        with self._lock:
            if self._closed:
                self._commit_batch(batch)
                return
            self._conn.execute(f"PRAGMA busy_timeout={_BUSY_MS}")
            try:
                self._commit_batch(batch)
            finally:
                self._conn.execute("PRAGMA busy_timeout=0")

    def _commit_batch(self, batch: list[_Write], begun: bool = False) -> None:
        """Commit ``batch``, setting each write's outcome (the caller holds the lock)."""
        if self._closed:
            failure: BaseException = RuntimeError("SqliteTaskStore is closed")
        else:
            try:
                _commit(self._conn, batch, begun)
                self._committed()
                return
            except Exception as exc:
                log.warning("SQLite write of %d tasks failed: %r", len(batch), exc)
                failure = StoreUnavailable()
        for w in batch:
            w.value, w.exc = None, failure

    def _committed(self) -> None:
        self._commits += 1
        due = self._checkpoint_due
        if due is not None and self._commits >= _CHECKPOINT_EVERY:
            self._commits = 0
            due.set()

    async def start(self, tg: Any) -> None:
        """Checkpoint the write-ahead log in the background from now on (a commit then
        never does: SQLite's automatic checkpoint runs in the committing call)."""
        if self._checkpoint_due is not None or self._closed:
            return
        with self._lock:
            self._conn.execute("PRAGMA wal_autocheckpoint=0")
        self._checkpoint_due = anyio.Event()
        tg.start_soon(self._checkpointer, name="mcp-tasks sqlite: checkpoints")

    async def _checkpointer(self) -> None:
        while not self._closed:
            due = self._checkpoint_due
            assert due is not None
            with anyio.move_on_after(_CHECKPOINT_S):
                await due.wait()
            self._checkpoint_due = anyio.Event()
            try:
                await anyio.to_thread.run_sync(self._checkpoint)
            except sqlite3.Error as exc:  # busy, full disk: the log waits for the next one
                log.info("SQLite checkpoint skipped: %r", exc)

    def _checkpoint(self) -> None:
        """Copy the log back into the database file (a passive checkpoint: it waits for
        no reader or writer), on a connection of its own (a worker thread's)."""
        if self._closed:
            return
        conn = sqlite3.connect(self.path, isolation_level=None)
        try:
            conn.execute(f"PRAGMA busy_timeout={_BUSY_MS}")
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        finally:
            conn.close()

    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        reader = self._reader
        if reader is None:
            return await self._call(fn)
        if self._closed:
            raise RuntimeError("SqliteTaskStore is closed")
        return fn(reader)

    async def create(self, record: TaskRecord) -> None:
        await self._insert(record, None)

    async def create_limited(self, record: TaskRecord, max_active: int) -> bool:
        """One statement in the writer's batch: the count and the insert are atomic, and
        no read runs on the event loop for it."""
        return await self._insert(record, max_active)

    async def _insert(self, record: TaskRecord, max_active: int | None) -> bool:
        values: tuple[Any, ...] = (
            record.task_id,
            record.requestor,
            record.method,
            record.status.value,
            record.created_at,
            record.last_updated_at,
            record.ttl_ms,
            record.expires_at,
            record.poll_interval_ms,
            storable_text(record.status_message),
            encode_json(record.result),
            encode_json(record.error),
            record.version,
            record.face,
            record.tool,
        )
        if max_active is None:
            sql, args = _INSERT, values
        else:
            sql, args = _INSERT_LIMITED, (*values, record.requestor, *_ACTIVE, max_active)

        def op(c: sqlite3.Connection) -> bool:
            try:
                return c.execute(sql, args).rowcount > 0
            except sqlite3.IntegrityError:
                raise KeyError(record.task_id) from None

        return await self._call(op)

    async def get(self, task_id: str) -> TaskRecord | None:
        if not storable_id(task_id):
            return None  # not one of ours: UTF-8 cannot carry it

        def op(c: sqlite3.Connection) -> TaskRecord | None:
            row = c.execute(
                f"SELECT {_COLUMNS} FROM tasks WHERE task_id = ?", (task_id,)
            ).fetchone()
            return None if row is None else _row(row)

        return await self._read(op)

    async def transition(
        self, task_id: str, status: TaskStatus, *, now: float, **change: Unpack[Change]
    ) -> TaskRecord | None:
        if not (allowed := transition_sources(task_id, status, change.get("expected"))):
            return None
        # Serialised before the lock: a result that is not JSON fails here, changing nothing.
        result_json, error_json = (
            encode_json(change.get("result")),
            encode_json(change.get("error")),
        )
        marks = ",".join("?" * len(allowed))
        sql = (
            "UPDATE tasks SET status = ?, last_updated_at = MAX(last_updated_at, ?), "
            "status_message = ?, result = COALESCE(?, result), error = COALESCE(?, error), "
            f"version = version + 1 WHERE task_id = ? AND status IN ({marks}) RETURNING {_COLUMNS}"
        )
        args = (
            status.value,
            now,
            storable_text(change.get("status_message")),
            result_json,
            error_json,
            task_id,
            *allowed,
        )

        # A result or error written here is not read back (nor decoded): the record
        # carries the caller's own value.
        result, error = change.get("result"), change.get("error")
        if result is not None or error is not None:
            sql = sql.replace(
                _COLUMNS,
                _COLUMNS.replace(
                    "result, error",
                    f"{'NULL' if result is not None else 'result'}, "
                    f"{'NULL' if error is not None else 'error'}",
                ),
            )

        def op(c: sqlite3.Connection) -> TaskRecord | None:
            row = c.execute(sql, args).fetchone()
            if row is None:
                return None
            rec = _row(row)
            if result is not None:
                rec.result = result
            if error is not None:
                rec.error = error
            return rec

        return await self._call(op)

    async def list_tasks(
        self,
        requestor: str,
        *,
        after: tuple[float, str] | None,
        limit: int,
        face: str | None = None,
    ) -> list[TaskRecord]:
        where, args = "requestor = ?", list[Any]([requestor])
        if after is not None:
            where += " AND (created_at, task_id) > (?, ?)"
            args += [after[0], after[1]]
        if face is not None:
            where += " AND face = ?"
            args.append(face)
        sql = f"SELECT {_COLUMNS} FROM tasks WHERE {where} ORDER BY created_at, task_id LIMIT ?"

        def op(c: sqlite3.Connection) -> list[TaskRecord]:
            return [_row(r) for r in c.execute(sql, (*args, limit)).fetchall()]

        return await self._read(op)

    async def delete(self, task_id: str) -> bool:
        if not storable_id(task_id):
            return False

        def op(c: sqlite3.Connection) -> bool:
            return c.execute("DELETE FROM tasks WHERE task_id = ?", (task_id,)).rowcount > 0

        return await self._call(op)

    async def pop_expired(self, now: float, limit: int) -> list[TaskRecord]:
        def op(c: sqlite3.Connection) -> list[TaskRecord]:
            # One savepoint of the batch's transaction: the read and the deletes are atomic.
            rows = c.execute(
                f"SELECT {_COLUMNS} FROM tasks WHERE expires_at IS NOT NULL "
                "AND expires_at <= ? ORDER BY expires_at LIMIT ?",
                (now, limit),
            ).fetchall()
            c.executemany("DELETE FROM tasks WHERE task_id = ?", [(r[0],) for r in rows])
            return [_row(r) for r in rows]

        return await self._call(op, steps=2)

    async def set_ttl(self, task_id: str, ttl_ms: int) -> TaskRecord | None:
        """One ``UPDATE ... RETURNING``: the ttl and the expiry the sweep reads, together."""
        if not storable_id(task_id):
            return None
        sql = (
            "UPDATE tasks SET ttl_ms = ?, expires_at = created_at + ? / 1000.0, "
            f"version = version + 1 WHERE task_id = ? AND status IN ({','.join('?' * len(_ACTIVE))}) "
            f"RETURNING {_COLUMNS}"
        )

        def op(c: sqlite3.Connection) -> TaskRecord | None:
            row = c.execute(sql, (ttl_ms, ttl_ms, task_id, *_ACTIVE)).fetchone()
            return None if row is None else _row(row)

        return await self._call(op)

    async def count_active(self, requestor: str) -> int:
        marks = ",".join("?" * len(_ACTIVE))

        def op(c: sqlite3.Connection) -> int:
            row = c.execute(
                f"SELECT COUNT(*) FROM tasks WHERE requestor = ? AND status IN ({marks})",
                (requestor, *_ACTIVE),
            ).fetchone()
            return int(row[0])

        return await self._read(op)

    async def recover(self, now: float, message: str) -> list[TaskRecord]:
        """Tasks left non-terminal by a dead process become ``failed`` with ``message``
        as statusMessage and a stored internal error (R-RESULT-1 answers it)."""
        error = encode_json(InternalError(message=message).to_error())
        marks = ",".join("?" * len(_ACTIVE))

        def op(c: sqlite3.Connection) -> list[TaskRecord]:
            rows = c.execute(
                "UPDATE tasks SET status = ?, status_message = ?, error = COALESCE(error, ?), "
                "last_updated_at = MAX(last_updated_at, ?), version = version + 1 "
                f"WHERE status IN ({marks}) RETURNING {_COLUMNS}",
                (FAILED.value, message, error, now, *_ACTIVE),
            ).fetchall()
            return [_row(r) for r in rows]

        return await self._call(op)

    async def list_all(
        self, query: TaskQuery, *, before: tuple[float, str] | None, limit: int
    ) -> TaskPage:
        sql, args = _list_all_sql(query, before, limit)

        def op(c: sqlite3.Connection) -> list[TaskRecord]:
            return [_row(r) for r in c.execute(sql, args).fetchall()]

        if self._reader is None:  # ":memory:": one database, the writer's
            recs = await self._call(op)
        else:
            recs = await anyio.to_thread.run_sync(self._read_apart, op)
        last = recs[-1] if len(recs) >= limit > 0 else None
        return TaskPage(recs, None if last is None else (last.created_at, last.task_id))

    def _read_apart(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn`` on a read-only connection of its own (a worker thread's)."""
        if self._closed:
            raise RuntimeError("SqliteTaskStore is closed")
        conn = sqlite3.connect(self.path, isolation_level=None)
        try:
            conn.execute("PRAGMA busy_timeout=5000")
            conn.execute("PRAGMA query_only=1")
            return fn(conn)
        finally:
            conn.close()

    async def close(self) -> None:
        def run() -> None:
            with self._lock:
                if not self._closed:
                    self._closed = True
                    self._conn.close()
                    if self._reader is not None:
                        self._reader.close()

        await anyio.to_thread.run_sync(run)


def _list_all_sql(
    query: TaskQuery, before: tuple[float, str] | None, limit: int
) -> tuple[str, list[Any]]:
    """``list_all``'s statement: the filters in SQL, newest first over ``tasks_by_created``."""
    where: list[str] = []
    args: list[Any] = []
    start = query.start(before)
    if start is not None:
        where.append("(created_at, task_id) < (?, ?)")
        args += [start[0], start[1]]
    if query.created_after is not None:
        where.append("created_at >= ?")
        args.append(query.created_after)
    if query.statuses is not None:
        values = sorted(s.value for s in query.statuses)
        where.append(f"status IN ({','.join('?' * len(values))})")
        args += values
    for column, value in (("requestor", query.requestor), ("tool", query.tool)):
        if value is not None:
            where.append(f"{column} = ?")
            args.append(value)
    cond = f"WHERE {' AND '.join(where)} " if where else ""
    sql = f"SELECT {_COLUMNS} FROM tasks {cond}ORDER BY created_at DESC, task_id DESC LIMIT ?"
    return sql, [*args, max(0, limit)]
