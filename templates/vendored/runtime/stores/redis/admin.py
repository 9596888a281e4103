"""Operators' listing of the Redis store (``RedisTaskStore.list_all``): every requestor's
tasks, newest first, from ``NS:all`` (or one requestor's ``NS:{TAG}:idx``).

Off every request's path: the engine never calls it. A page is one ``ZREVRANGEBYLEX`` and one
pipeline of ``HMGET`` per chunk of the index, the filters applied here, at most ``SCAN``
index entries read per call (the rest is the next page's). Entries whose task is gone
(Redis expired its key before a sweep) are dropped from the index as they are met.

``NS:all`` is kept by ``create``, ``delete`` and ``pop_expired``; tasks stored before it
existed are added once, on the first listing of a namespace (``NS:all-ready`` records it).
"""

from __future__ import annotations

import struct
import weakref
from typing import Any

from ....store import TaskPage, TaskQuery, TaskRecord
from .codec import decode, text
from .keys import LEX_PREFIX, Keys, all_member, lexkey
from .scripting import Call, ScriptRunner

#: index entries one ``list_all`` call reads at most, and per round trip
SCAN = 5000
CHUNK = 250
#: the task hash fields a listing reads (no result, no error: a listing shows tasks)
FIELDS = ("r", "m", "s", "c", "u", "ttl", "pi", "msg", "v", "f", "tl", "x")

#: runners whose namespace's ``NS:all`` is known to hold every task
_ready: weakref.WeakKeyDictionary[ScriptRunner, set[str]] = weakref.WeakKeyDictionary()


def unlex(lex: str) -> tuple[float, str]:
    """``(created_at, task_id)`` of a ``lexkey`` (its inverse)."""
    bits = int(lex[:LEX_PREFIX], 16)
    bits = bits & ~(1 << 63) if bits >> 63 else bits ^ 0xFFFFFFFFFFFFFFFF
    (created_at,) = struct.unpack(">d", struct.pack(">Q", bits))
    return created_at, lex[LEX_PREFIX:]


def _glob(value: str) -> str:
    """``value`` as a literal in a ``SCAN MATCH`` pattern."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in value)


async def ensure_index(run: ScriptRunner, keys: Keys) -> None:
    """Add the tasks stored before ``NS:all`` existed to it, once per namespace."""
    done = _ready.setdefault(run, set())
    if keys.ns in done:
        return
    if not await run.command("EXISTS", keys.all_ready):
        pattern = f"{_glob(keys.ns)}:{{*}}:idx"
        cursor: Any = 0
        while True:
            cursor, found = await run.command("SCAN", cursor, "MATCH", pattern, "COUNT", 500)
            for key in (text(k) for k in found):
                tag = key[len(keys.ns) + 2 : -len("}:idx")]
                members = [text(m) for m in await run.command("ZRANGE", key, 0, -1)]
                if members:
                    pairs = [x for m in members for x in (0, all_member(m, tag))]
                    await run.command("ZADD", keys.all, "NX", *pairs)
            if int(cursor) == 0:
                break
        await run.command("SET", keys.all_ready, "1")
    done.add(keys.ns)


async def list_all(
    run: ScriptRunner,
    keys: Keys,
    query: TaskQuery,
    before: tuple[float, str] | None,
    limit: int,
) -> TaskPage:
    """``TaskStore.list_all`` on Redis (see the module's docstring)."""
    if limit <= 0:
        return TaskPage([], before)
    own, one_tag = query.requestor is not None, ""
    if query.requestor is not None:
        one_tag = keys.tag(query.requestor)
        index = keys.idx(one_tag)
    else:
        await ensure_index(run, keys)
        index = keys.all
    start = query.start(before)
    hi = "+" if start is None else "(" + lexkey(*start)
    lo = "-" if query.created_after is None else "[" + lexkey(query.created_after, "")
    out: list[TaskRecord] = []
    scanned = 0
    while scanned < SCAN:
        chunk = min(CHUNK, SCAN - scanned)
        found = await run.command("ZREVRANGEBYLEX", index, hi, lo, "LIMIT", 0, chunk)
        members = [text(m) for m in found]
        if not members:
            return TaskPage(out, None)
        entries = [(m, one_tag) if own else _split(m) for m in members]
        calls: list[Call] = [
            (None, ["HMGET", keys.task(tag, lex[LEX_PREFIX:]), *FIELDS]) for lex, tag in entries
        ]
        stale: list[str] = []
        replies = await run.pipeline(calls)
        for member, (lex, _tag), values in zip(members, entries, replies, strict=True):
            scanned += 1
            hi = "(" + member
            if values[0] is None:
                stale.append(member)
                continue
            h = {f: text(v) for f, v in zip(FIELDS, values, strict=True) if v is not None}
            rec = decode(h, lex[LEX_PREFIX:])
            if rec is not None and query.matches(rec):
                out.append(rec)
                if len(out) >= limit:
                    await _drop(run, index, stale)
                    return TaskPage(out, (rec.created_at, rec.task_id))
        await _drop(run, index, stale)
        if len(members) < chunk:
            return TaskPage(out, None)
    return TaskPage(out, unlex(hi[1:].split(" ", 1)[0]))


def _split(member: str) -> tuple[str, str]:
    """``(lexkey, tag)`` of an ``NS:all`` member."""
    lex, _, tag = member.partition(" ")
    return lex, tag


async def _drop(run: ScriptRunner, index: str, stale: list[str]) -> None:
    if stale:
        await run.command("ZREM", index, *stale)
