"""mcptask admin: an operator's view of every requestor's tasks, without a requestor's token.

commands:
  mcptask admin list   WHERE [--status S[,S]] [--requestor R] [--tool T]
                             [--newer-than AGE] [--older-than AGE] [--limit N] [--cursor C]
                             [--all] [--json]
  mcptask admin show   WHERE TASK_ID [--json]
  mcptask admin cancel WHERE TASK_ID [--json]

WHERE is one of:
  --store sqlite:PATH | redis://HOST:PORT/DB[?namespace=NS]
      read and write the store itself (no server needed; the one the server's --store names)
  --url http://HOST:PORT --token-file FILE
      a server's admin API (its --ops address and --admin-token-file), e.g. for the memory
      store, which lives inside the server process

AGE: 90s, 15m, 2h, 3d. list is newest first, --limit per page (default 50); --all walks
every page, else the next page's --cursor is printed on stderr.

cancel follows the engine's rules: a terminal task is left as it is (exit 1). Through
--url the server cancels it and stops its work. Through --store the status changes in the
store (the task is cancelled, tasks/result answers the cancellation); the work, if a
server runs it, is stopped by that server: on Redis at once (the instance running it gets
the change event), on SQLite at its next sweep (about a second). With no server running,
nothing else happens: nothing runs the task.

Exit status: 0 done; 1 no such task, or not cancelled; 2 usage, or the store or server
cannot be reached.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import anyio

from .protocol import CANCELLED, INPUT_REQUIRED
from .runtime.engine.coordination import stored_inputs
from .runtime.engine.task_engine import cancel_change
from .runtime.ops.service import OPERATOR_CANCELLED_MESSAGE
from .runtime.ops.views import (
    QueryError,
    decode_cursor,
    encode_cursor,
    inputs_json,
    query_of,
    task_view,
)
from .store import SharedTaskStore, TaskQuery, TaskStore

__all__ = ["main"]


class Failure(Exception):
    """An answer to print on stderr with an exit status."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


# ---------------------------------------------------------------------- where the tasks are


def open_store(spec: str) -> TaskStore:
    """The store of ``--store`` (as the server's own ``--store`` names it)."""
    if spec.startswith("sqlite:") and len(spec) > len("sqlite:"):
        path = Path(spec[len("sqlite:") :])
        if not path.is_file():
            raise Failure(f"--store: no SQLite file at {path}", 2)
        from .runtime.stores.sqlite import SqliteTaskStore

        return SqliteTaskStore(path)
    if spec.startswith(("redis://", "rediss://", "unix://")):
        from .runtime.stores.redis import RedisTaskStore

        return RedisTaskStore.from_url(spec)
    if spec == "memory":
        raise Failure(
            "--store memory: that store lives inside the server process; use --url with the "
            "server's --ops address and --token-file with its admin token",
            2,
        )
    raise Failure(f"--store must be sqlite:PATH or redis://HOST:PORT/DB, not {spec!r}", 2)


class StoreAdmin:
    """The operator's calls on a store, without an engine."""

    def __init__(self, store: TaskStore) -> None:
        self.store = store

    async def list(self, query: TaskQuery, cursor: str | None, limit: int) -> dict[str, Any]:
        try:
            page = await self.store.list_all(query, before=decode_cursor(cursor), limit=limit)
        except NotImplementedError as exc:
            raise Failure(str(exc), 2) from None
        now = time.time()
        return {
            "tasks": [task_view(r, now) for r in page.tasks],
            "nextCursor": encode_cursor(page.next),
        }

    async def show(self, task_id: str) -> dict[str, Any] | None:
        rec = await self.store.get(task_id)
        if rec is None:
            return None
        out = task_view(rec, time.time(), detail=True)
        if rec.status == INPUT_REQUIRED and isinstance(self.store, SharedTaskStore):
            items = await self.store.pending_inputs(task_id, rec.requestor)
            out["inputRequests"] = inputs_json(stored_inputs(task_id, items))
        else:
            out["inputRequests"] = None if rec.status == INPUT_REQUIRED else []
        return out

    async def cancel(self, task_id: str) -> dict[str, Any]:
        change = cancel_change(OPERATOR_CANCELLED_MESSAGE)
        new = await self.store.transition(task_id, CANCELLED, now=time.time(), **change)
        rec = new if new is not None else await self.store.get(task_id)
        view = None if rec is None else task_view(rec, time.time(), detail=True)
        return {"moved": new is not None, "task": view}


class HttpAdmin:
    """The same calls through a server's admin API (``OpsApp``)."""

    def __init__(self, url: str, token: str) -> None:
        self.base = url.rstrip("/") + "/admin/api/"
        self.token = token

    def _call(self, path: str, method: str = "GET") -> tuple[int, Any]:
        request = urllib.request.Request(
            self.base + path, method=method, headers={"Authorization": f"Bearer {self.token}"}
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            if exc.code == 401:
                message = "unauthorized (HTTP 401): check --token-file (the admin token)"
                raise Failure(message, 2) from None
            body = json.loads(exc.read() or b"{}")
            if exc.code == 404:
                return 404, body
            raise Failure(f"the server answered HTTP {exc.code}: {body.get('error')}", 2) from None
        except (urllib.error.URLError, OSError) as exc:
            raise Failure(f"cannot reach {self.base}: {exc}", 2) from None

    async def list(self, query: TaskQuery, cursor: str | None, limit: int) -> dict[str, Any]:
        params: list[tuple[str, str]] = [("limit", str(limit))]
        params += [("status", s.value) for s in sorted(query.statuses or ())]
        for name, value in (("requestor", query.requestor), ("tool", query.tool)):
            if value is not None:
                params.append((name, value))
        now = time.time()
        if query.created_after is not None:
            params.append(("newer_than", f"{max(0.0, now - query.created_after):.3f}"))
        if query.created_before is not None:
            params.append(("older_than", f"{max(0.0, now - query.created_before):.3f}"))
        if cursor:
            params.append(("cursor", cursor))
        _, body = await anyio.to_thread.run_sync(
            self._call, "tasks?" + urllib.parse.urlencode(params)
        )
        return dict(body)

    async def show(self, task_id: str) -> dict[str, Any] | None:
        status, body = await anyio.to_thread.run_sync(self._call, "tasks/" + _quote(task_id))
        return None if status == 404 else dict(body)

    async def cancel(self, task_id: str) -> dict[str, Any]:
        path = f"tasks/{_quote(task_id)}/cancel"
        _, body = await anyio.to_thread.run_sync(self._call, path, "POST")
        return dict(body)


def _quote(task_id: str) -> str:
    return urllib.parse.quote(task_id, safe="")


# ---------------------------------------------------------------------- output


def _age(seconds: float | None) -> str:
    if seconds is None:
        return ""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


def print_table(tasks: list[dict[str, Any]]) -> None:
    rows = [("TASK ID", "STATUS", "TOOL", "REQUESTOR", "AGE", "MESSAGE")]
    for t in tasks:
        message = (t.get("statusMessage") or "").replace("\n", " ")
        rows.append(
            (
                t["taskId"], t["status"], t.get("tool") or "-", t["requestor"],
                _age(t.get("ageS")), message[:60] + ("..." if len(message) > 60 else ""),
            )
        )  # fmt: skip
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1])


def print_task(t: dict[str, Any]) -> None:
    duration = t.get("durationS")
    facts = [
        ("task", t["taskId"]), ("status", t["status"]), ("message", t.get("statusMessage")),
        ("requestor", t["requestor"]), ("tool", t.get("tool")), ("face", t["face"]),
        ("method", t["method"]), ("created", t["createdAt"]), ("updated", t["lastUpdatedAt"]),
        ("expires", t.get("expiresAt") or "never"), ("age", _age(t.get("ageS"))),
        ("duration", None if duration is None else _age(duration)),
    ]  # fmt: skip
    for key, value in facts:
        if value is not None:
            print(f"{key + ':':11}{value}")
    inputs = t.get("inputRequests")
    if inputs is None:
        print("inputs:    outstanding, held by the server running it (not in this store)")
    for i in inputs or []:
        print(f"input:     {i['method']} {json.dumps(i.get('params'), ensure_ascii=False)}")
    for key in ("result", "error"):
        if t.get(key) is not None:
            print(f"{key}:\n{json.dumps(t[key], indent=2, ensure_ascii=False)}")


def _cancel_note(args: argparse.Namespace) -> str:
    """What happens to the work of a task cancelled through ``args``' way in."""
    if args.url:
        return "the server stopped its work"
    if str(args.store).startswith("sqlite:"):
        return (
            "a server running it stops the work at its next sweep (about a second); "
            "with none running, nothing else runs it"
        )
    return "the instance running it stops the work at once; with none, nothing else runs it"


# ---------------------------------------------------------------------- the commands


async def _list(admin: Any, args: argparse.Namespace) -> int:
    try:
        query = query_of(
            time.time(),
            statuses=args.status or (),
            requestor=args.requestor,
            tool=args.tool,
            newer_than=args.newer_than,
            older_than=args.older_than,
        )
        decode_cursor(args.cursor)
    except QueryError as exc:
        raise Failure(str(exc), 2) from None
    tasks: list[dict[str, Any]] = []
    cursor = args.cursor
    while True:
        page = await admin.list(query, cursor, args.limit)
        tasks += page["tasks"]
        cursor = page.get("nextCursor")
        if not args.all or cursor is None:
            break
    if args.json:
        print(json.dumps({"tasks": tasks, "nextCursor": cursor}, indent=2, ensure_ascii=False))
    else:
        print_table(tasks)
        if cursor is not None:
            print(f"more: --cursor {cursor}", file=sys.stderr)
    return 0


async def _show(admin: Any, args: argparse.Namespace) -> int:
    task = await admin.show(args.task_id)
    if task is None:
        raise Failure(f"no task {args.task_id}", 1)
    if args.json:
        print(json.dumps(task, indent=2, ensure_ascii=False))
    else:
        print_task(task)
    return 0


async def _cancel(admin: Any, args: argparse.Namespace) -> int:
    out = await admin.cancel(args.task_id)
    task = out.get("task")
    if args.json:
        print(json.dumps(out, indent=2, ensure_ascii=False))
    if task is None:
        raise Failure(f"no task {args.task_id}", 1)
    if not out.get("moved"):
        if not args.json:
            print(f"{args.task_id} is already {task['status']}: not cancelled", file=sys.stderr)
        return 1
    if not args.json:
        print(f"cancelled {args.task_id}: {_cancel_note(args)}")
    return 0


_COMMANDS = {"list": _list, "show": _show, "cancel": _cancel}


async def _run(args: argparse.Namespace) -> int:
    if args.url:
        if not args.token_file:
            raise Failure("--url needs --token-file FILE (the server's admin token)", 2)
        token = (Path(args.token_file).read_text(encoding="utf-8").splitlines() or [""])[0]
        return await _COMMANDS[args.action](HttpAdmin(args.url, token.strip()), args)
    store = open_store(args.store)
    try:
        return await _COMMANDS[args.action](StoreAdmin(store), args)
    finally:
        await store.close()


def parser() -> argparse.ArgumentParser:
    assert __doc__ is not None
    top = argparse.ArgumentParser(
        prog="mcptask admin",
        description=__doc__.split("\n\n")[0],
        epilog="\n\n".join(__doc__.split("\n\n")[1:]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    where = argparse.ArgumentParser(add_help=False)
    group = where.add_mutually_exclusive_group(required=True)
    group.add_argument("--store", help="sqlite:PATH or redis://HOST:PORT/DB[?namespace=NS]")
    group.add_argument("--url", help="a server's --ops address (http://HOST:PORT)")
    where.add_argument("--token-file", help="with --url: a file holding the admin token")
    where.add_argument("--json", action="store_true", help="JSON instead of text")
    actions = top.add_subparsers(dest="action", required=True)
    lst = actions.add_parser("list", parents=[where], help="every requestor's tasks")
    lst.add_argument("--status", action="append", help="keep these statuses (repeat, or S,S)")
    lst.add_argument("--requestor", help="keep one requestor's tasks")
    lst.add_argument("--tool", help="keep one tool's tasks")
    lst.add_argument("--newer-than", metavar="AGE", help="created less than AGE ago (15m)")
    lst.add_argument("--older-than", metavar="AGE", help="created more than AGE ago (2h)")
    lst.add_argument("--limit", type=int, default=50, help="tasks per page (default 50)")
    lst.add_argument("--cursor", help="the page after the one that printed it")
    lst.add_argument("--all", action="store_true", help="every page")
    for name, text in (("show", "one task, in full"), ("cancel", "cancel one task")):
        p = actions.add_parser(name, parents=[where], help=text)
        p.add_argument("task_id", help="a task ID (from admin list)")
    return top


def main(argv: list[str]) -> int:
    """``mcptask admin ...`` (``argv`` after ``admin``); returns the exit status."""
    args = parser().parse_args(argv)
    if getattr(args, "limit", 1) < 1:
        print("mcptask admin: --limit: at least 1", file=sys.stderr)
        return 2
    try:
        return anyio.run(_run, args)
    except Failure as exc:
        print(f"mcptask admin: {exc}", file=sys.stderr)
        return exc.code
    except OSError as exc:
        print(f"mcptask admin: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        from .errors import TaskError

        if isinstance(exc, TaskError):
            print(f"mcptask admin: {exc.message}", file=sys.stderr)
            return 2
        raise
