"""``RedisTaskStore``: the ``TaskStore`` methods, on top of the rooms of this package
(``keys``, ``codec``, ``scripting`` + ``scripts/*.lua``, ``events``, ``leases``,
``inputs``, ``secret``).

Status changes are Lua scripts that compare the status and write in one step on the
server, so a late completion after a cancel is a no-op on any instance (R-CANCEL-3);
each also publishes a change event. Task keys expire in Redis ``expiry_grace_s``
after the task's ttl, a backstop for when no engine sweeps; the engine's sweeper
normally removes them first through ``pop_expired``. Cost of ``pop_expired``: three
round trips per batch, work proportional to the expired tasks only.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import urllib.parse
from collections.abc import Mapping
from typing import Any, Unpack

import anyio
import anyio.abc
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff

from ....errors import StoreUnavailable
from ....protocol import INPUT_REQUIRED, REVISION, TERMINAL, WORKING, TaskStatus
from ....store import (
    Change,
    SharedTaskStore,
    TaskPage,
    TaskQuery,
    TaskRecord,
    storable_id,
    storable_text,
    transition_sources,
)
from ...background import close_group, open_group
from .admin import list_all as _list_all
from .codec import TERMINAL_VALUES, as_dict, decode, dumps, fields, text
from .events import Events, TaskWatchHandle
from .inputs import Inputs
from .keys import LEX_PREFIX, Keys, all_member, lexkey
from .leases import Leases
from .observed import on_connect_counting_reconnects
from .scripting import (
    ANSWER_INPUTS,
    CREATE,
    GET,
    LIST,
    OFFER_INPUT,
    REMOVE,
    RESUME,
    SET_TTL,
    TRANSITION,
    Call,
    ScriptRunner,
)
from .secret import SharedSecret

#: Tag cache entries (task ID -> requestor tag) kept per instance.
_TAG_CACHE = 100_000


def _client(url: str, socket_timeout_s: float) -> Any:
    return aioredis.Redis.from_url(
        url,
        decode_responses=True,
        socket_timeout=socket_timeout_s,
        socket_connect_timeout=min(socket_timeout_s, 2.0),
        retry=Retry(ExponentialBackoff(cap=0.2, base=0.02), 2),
        health_check_interval=30,
        redis_connect_func=on_connect_counting_reconnects,
    )


#: What undoes a command of ``create`` that added a member (``[cmd, key, ..., member]``).
_UNDO: dict[str, Any] = {
    "ZADD": lambda a: (None, ["ZREM", a[1], a[-1]]),
    "SADD": lambda a: (None, ["SREM", a[1], a[-1]]),
}


class RedisTaskStore(SharedTaskStore):
    """Tasks in Redis, shared by every engine that uses the same Redis and namespace."""

    #: Other processes may change tasks: the engine waits on ``watch`` instead of polling.
    shared = True
    batches = True  #: concurrent calls share one pipeline (``scripting.py``)

    def __init__(
        self,
        url: str | None = None,
        *,
        client: Any | None = None,
        namespace: str = "mcp-tasks",
        lease_s: float = 10.0,
        expiry_grace_s: float = 30.0,
        socket_timeout_s: float = 5.0,
        instance_id: str | None = None,
    ) -> None:
        if (url is None) == (client is None):
            raise ValueError("give exactly one of url or client")
        self.keys = Keys(namespace)
        self._owns_client = client is None
        if client is None:
            assert url is not None
            client = _client(url, socket_timeout_s)
            where = url.split("://", 1)[-1].split("@")[-1]  # no password in the log
        else:
            where = repr(client)
        self.redis: Any = client
        self.expiry_grace_s = expiry_grace_s
        self.instance_id = instance_id or (
            f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        )
        self._run = ScriptRunner(client, where)
        self.ns, self.channel = self.keys.ns, self.keys.channel
        #: The Redis address (for logs only).
        self.where = where
        self.lease_s = lease_s
        self.events = Events(client, self.keys.channel)
        self.leases = Leases(self._run, self.keys, self.instance_id, lease_s)
        self.inputs = Inputs(self._run, self.keys)
        self._secret = SharedSecret(self._run, self.keys)
        # Redis may lose the secret while we cannot see it: read it again afterwards.
        self._run.on_down.append(self._secret.forget)
        self.events.on_subscribed.append(self._secret.forget)
        self._tags: dict[str, str] = {}
        #: task ID -> lexkey of the tasks created here: ``delete`` in one round trip
        self._entries: dict[str, str] = {}
        self._started = False
        self._tg: anyio.abc.TaskGroup | None = None

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> RedisTaskStore:
        """``redis://HOST:PORT/DB[?namespace=NS&lease=SECONDS]`` (other query options go
        to redis-py)."""
        parts = urllib.parse.urlsplit(url)
        rest: list[tuple[str, str]] = []
        for key, value in urllib.parse.parse_qsl(parts.query):
            if key == "namespace":
                kwargs["namespace"] = value
            elif key == "lease":
                kwargs["lease_s"] = float(value)
            else:
                rest.append((key, value))
        clean = urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(rest)))
        return cls(clean, **kwargs)

    @property
    def round_trips(self) -> int:
        """Round trips issued (commands and pipelines), for benchmarks."""
        return self._run.round_trips

    @staticmethod
    def tag(requestor: str) -> str:
        return Keys.tag(requestor)

    async def _tag_of(self, task_id: str, *, fresh: bool = False) -> str | None:
        if not fresh:
            tag = self._tags.get(task_id)
            if tag is not None:
                return tag
        raw = await self._run.command("GET", self.keys.ptr(task_id))
        if raw is None:
            self._tags.pop(task_id, None)
            return None
        tag = text(raw)
        if len(self._tags) >= _TAG_CACHE:
            self._tags.clear()
        self._tags[task_id] = tag
        return tag

    # ------------------------------------------------------------------ TaskStore

    async def create(self, record: TaskRecord) -> None:
        await self._create(record, None)

    async def create_limited(self, record: TaskRecord, max_active: int) -> bool:
        """The count is ``create.lua``'s (the requestor's active set): one round trip, and
        atomic on the server. A refusal costs a second one (it undoes the ID pointer)."""
        return await self._create(record, max_active)

    async def _create(self, record: TaskRecord, max_active: int | None) -> bool:
        keys, tid = self.keys, record.task_id
        tag = keys.tag(record.requestor)
        px = (
            None
            if record.ttl_ms is None
            else max(1, int(record.ttl_ms + self.expiry_grace_s * 1000))
        )
        ptr = ["SET", keys.ptr(tid), tag, "NX"] + ([] if px is None else ["PX", px])
        lex = lexkey(record.created_at, tid)
        active = record.status not in TERMINAL
        hset = fields(record, lex, self.instance_id if active else None)
        limit = "" if max_active is None else max_active
        args = [tid, lex, "" if px is None else px, int(active), limit, *hset]
        # One round trip: the ID pointer (its own slot), the task (the requestor's slot),
        # the expiry and lease entries. A taken ID is rare (IDs are random): undone below.
        calls: list[Call] = [
            (None, ptr),
            (CREATE, [[keys.task(tag, tid), keys.idx(tag), keys.active(tag)], args]),
        ]
        added: list[Call] = [(None, ["ZADD", keys.all, "NX", 0, all_member(lex, tag)])]
        # NX / set semantics: a reply of 1 means this call added it
        if record.expires_at is not None:
            added.append(
                (None, ["ZADD", keys.expiry, "NX", repr(record.expires_at), f"{tag}:{lex}"])
            )
        if active:
            added.append(
                (None, ["SADD", keys.owned(self.instance_id), self.leases.member(tag, tid)])
            )
        calls += added
        try:
            out = await self._run.pipeline(calls)
        except BaseException:
            with anyio.CancelScope(shield=True):
                try:
                    await self._run.command("DEL", keys.ptr(tid))
                except Exception:  # the pointer expires with the task anyway
                    pass
            raise
        if not out[0]:  # the ID is taken: undo what this call added, keep the other task
            undo = [_UNDO[c[1][0]](c[1]) for c, r in zip(added, out[2:], strict=True) if r == 1]
            if out[1] == 1:  # the task was written (the ID is another requestor's)
                undo.append((REMOVE, self._remove_args(tag, tid, lex, None, "")))
            with anyio.CancelScope(shield=True):
                await self._run.pipeline(undo)
            raise KeyError(tid)
        if out[1] == 0:
            raise KeyError(tid)
        if out[1] == -1:  # no room (R-SEC-4): undo the pointer and what this call added
            undo = [_UNDO[c[1][0]](c[1]) for c, r in zip(added, out[2:], strict=True) if r == 1]
            with anyio.CancelScope(shield=True):
                await self._run.pipeline([(None, ["DEL", keys.ptr(tid)]), *undo])
            return False
        self._tags[tid] = tag
        if len(self._entries) >= _TAG_CACHE:
            self._entries.clear()
        self._entries[tid] = lex
        return True

    async def get(self, task_id: str) -> TaskRecord | None:
        if not storable_id(task_id):
            return None  # not one of ours: UTF-8 (and so Redis' protocol here) cannot carry it
        tag = await self._tag_of(task_id)
        if tag is None:
            return None
        rec = decode(
            as_dict(await self._run.eval(GET, [self.keys.task(tag, task_id)], [])),
            task_id,
        )
        if rec is None and task_id in self._tags:
            # A stale cached tag (the ID was deleted and reused): ask the pointer once.
            tag2 = await self._tag_of(task_id, fresh=True)
            if tag2 is not None and tag2 != tag:
                flat = await self._run.eval(GET, [self.keys.task(tag2, task_id)], [])
                rec = decode(as_dict(flat), task_id)
        return rec

    async def get_own(self, task_id: str, requestor: str) -> TaskRecord | None:
        """``get`` looking in ``requestor``'s slot first, not the ID's pointer: one round
        trip for a task of another instance (``get`` corrects a wrong guess as a stale tag)."""
        tags = self._tags
        if task_id not in tags and storable_id(task_id):
            if len(tags) >= _TAG_CACHE:
                tags.clear()
            tags[task_id] = self.keys.tag(requestor)
        return await self.get(task_id)

    async def transition(
        self, task_id: str, status: TaskStatus, *, now: float, **change: Unpack[Change]
    ) -> TaskRecord | None:
        if not (allowed := transition_sources(task_id, status, change.get("expected"))):
            return None
        # Serialised first: a result that is not JSON fails here, changing nothing.
        result, error, message = (
            change.get("result"),
            change.get("error"),
            storable_text(change.get("status_message")),
        )
        res = "" if result is None else dumps(result)
        err = "" if error is None else dumps(error)
        tag = await self._tag_of(task_id)
        if tag is None:
            return None
        args = [
            task_id, status.value, repr(float(now)), int(message is not None),
            message or "", res, err, self.keys.channel, TERMINAL_VALUES, *allowed,
        ]  # fmt: skip
        calls: list[Call] = [(TRANSITION, [self.keys.task_keys(tag, task_id), args])]
        member = self.leases.member(tag, task_id)
        if status in TERMINAL:
            # This instance usually runs the task: drop it from its lease set in the same trip.
            calls.append((None, ["SREM", self.keys.owned(self.instance_id), member]))
        out = await self._run.pipeline(calls)
        if not out[0]:
            return None
        h = as_dict(out[0])
        owner = h.get("o")
        if status in TERMINAL and owner is not None and owner != self.instance_id:
            await self._run.command("SREM", self.keys.owned(owner), member)
        rec = decode(h, task_id)
        if rec is not None:  # what it wrote is not sent back: the caller's own values
            rec.result = rec.result if result is None else result
            rec.error = rec.error if error is None else error
        return rec

    async def set_ttl(self, task_id: str, ttl_ms: int) -> TaskRecord | None:
        """Two round trips: the task's fields and key expiries (``set_ttl.lua``), then its
        entry in the expiry index and its ID pointer (other slots)."""
        tag = await self._tag_of(task_id) if storable_id(task_id) else None
        if tag is None:
            return None
        t, _, inp, cl, ans = self.keys.task_keys(tag, task_id)
        grace_ms = int(self.expiry_grace_s * 1000)
        reply = await self._run.eval(
            SET_TTL, [t, inp, cl, ans], [ttl_ms, grace_ms, TERMINAL_VALUES]
        )
        if not reply:
            return None
        flat, px = reply
        rec = decode(as_dict(flat), task_id)
        if rec is None:
            return None
        expires = rec.expires_at
        assert expires is not None
        lex = lexkey(rec.created_at, task_id)
        await self._run.pipeline(
            [
                (None, ["ZADD", self.keys.expiry, repr(expires), f"{tag}:{lex}"]),
                (None, ["PEXPIRE", self.keys.ptr(task_id), px]),
            ]
        )
        return rec

    async def list_tasks(
        self,
        requestor: str,
        *,
        after: tuple[float, str] | None,
        limit: int,
        face: str | None = None,
    ) -> list[TaskRecord]:
        if limit <= 0:
            return []
        tag = self.keys.tag(requestor)
        after_lex = "" if after is None else lexkey(after[0], after[1])
        reply = await self._run.eval(
            LIST,
            [self.keys.idx(tag), self.keys.active(tag)],
            [self.keys.task(tag, ""), after_lex, limit, face or "", REVISION],
        )
        out: list[TaskRecord] = []
        for h in json.loads(reply):  # one JSON array of hashes: one reply to parse
            rec = decode(h, h["k"][LEX_PREFIX:])
            if rec is not None:
                out.append(rec)
        return out

    def _remove_args(
        self, tag: str, task_id: str, lex: str, now: float | None, channel: str
    ) -> list[Any]:
        """``remove.lua``'s keys and args: delete (``now`` None) or expire a task."""
        t, active, inp, cl, ans = self.keys.task_keys(tag, task_id)
        keys = [t, self.keys.idx(tag), active, inp, cl, ans]
        when = "" if now is None else repr(float(now))
        return [keys, [task_id, lex, when, channel, TERMINAL_VALUES]]

    async def delete(self, task_id: str) -> bool:
        if not storable_id(task_id):
            return False
        tag = await self._tag_of(task_id)
        if tag is None:
            return False
        keys, args = self._remove_args(tag, task_id, "", None, self.keys.channel)
        calls: list[Call] = [(REMOVE, [keys, args])]
        lex = self._entries.pop(task_id, "")
        if lex:  # created here: its index entries go in the same round trip
            calls += [(None, c) for c in self.keys.unindex(tag, task_id, lex)]
        h = as_dict((await self._run.pipeline(calls))[0])
        rec = decode(h, task_id)
        self._tags.pop(task_id, None)
        if rec is None:
            return False
        if not lex:
            lex = lexkey(rec.created_at, task_id)
            await self._run.pipeline([(None, c) for c in self.keys.unindex(tag, task_id, lex)])
        owner = h.get("o")
        if owner is not None and rec.status not in TERMINAL:  # an ended one left it already
            await self._run.command(
                "SREM", self.keys.owned(owner), self.leases.member(tag, task_id)
            )
        return True

    async def pop_expired(self, now: float, limit: int) -> list[TaskRecord]:
        out: list[TaskRecord] = []
        while len(out) < limit:
            want = limit - len(out)
            due = ["ZRANGEBYSCORE", self.keys.expiry, "-inf", repr(float(now)), "LIMIT", 0, want]
            members = [text(m) for m in await self._run.command(*due)]
            if not members:
                break
            out += await self._pop_members(members, now)
            if len(members) < want:
                break
        return out

    async def _pop_members(self, members: list[str], now: float) -> list[TaskRecord]:
        """Remove the expired tasks ``TAG:lexkey`` (two round trips)."""
        tasks = [(tag, lex[LEX_PREFIX:], lex) for tag, lex in (m.split(":", 1) for m in members)]
        removed = await self._run.pipeline(
            [(REMOVE, self._remove_args(tag, tid, lex, now, "")) for tag, tid, lex in tasks]
        )
        # Our own lease set forgets them all (a task Redis expired first is unknown here).
        mine = [self.leases.member(tag, tid) for tag, tid, _ in tasks]
        cleanup: list[Call] = [
            (None, ["ZREM", self.keys.expiry, *members]),
            (None, ["ZREM", self.keys.all, *(all_member(lex, tag) for tag, _, lex in tasks)]),
            (None, ["SREM", self.keys.owned(self.instance_id), *mine]),
        ]
        out: list[TaskRecord] = []
        for (tag, tid, _), flat in zip(tasks, removed, strict=True):
            h = as_dict(flat)
            rec = decode(h, tid)
            if rec is None:
                continue
            out.append(rec)
            self._tags.pop(tid, None)
            self._entries.pop(tid, None)
            cleanup.append((None, ["DEL", self.keys.ptr(tid)]))
            owner = h.get("o")
            if owner is not None and owner != self.instance_id and rec.status not in TERMINAL:
                member = self.leases.member(tag, tid)
                cleanup.append((None, ["SREM", self.keys.owned(owner), member]))
        await self._run.pipeline(cleanup)
        return out

    async def count_active(self, requestor: str) -> int:
        return int(await self._run.command("SCARD", self.keys.active(self.keys.tag(requestor))))

    async def recover(self, now: float, message: str) -> list[TaskRecord]:
        """Reap instances whose lease expired: their non-terminal tasks become ``failed``
        with ``message`` and an internal error. Tasks of live instances are untouched.
        The engine calls it at start and every sweep (the one owner of reaping)."""
        return await self.leases.reap(now, message)

    async def list_all(
        self, query: TaskQuery, *, before: tuple[float, str] | None, limit: int
    ) -> TaskPage:
        """Operators' listing across requestors (``admin.py``): ``NS:all`` newest first."""
        return await _list_all(self._run, self.keys, query, before, limit)

    async def shared_secret(self) -> bytes:
        """One random secret per namespace, the same on every instance (``secret.py``);
        cheap to call per request: cached, re-read after an outage."""
        return await self._secret.get()

    # ------------------------------------------------------------------ cross-instance input

    async def put_input(self, task_id: str, requestor: str, item: dict[str, Any]) -> bool:
        """Queue an input request (``{"id", "method", "params"}``) for any result stream."""
        return await self.inputs.put(task_id, requestor, item)

    async def pending_inputs(self, task_id: str, requestor: str) -> list[dict[str, Any]]:
        """Every outstanding input request, oldest first (one ``HVALS``)."""
        return await self.inputs.pending(task_id, requestor)

    async def claim_inputs(
        self, task_id: str, requestor: str, claimer: str, lease_s: float
    ) -> list[dict[str, Any]]:
        """Input requests nobody is delivering now, claimed for ``claimer`` for ``lease_s``."""
        return await self.inputs.claim(task_id, requestor, claimer, lease_s)

    async def release_input(
        self, task_id: str, requestor: str, input_id: str, claimer: str
    ) -> None:
        await self.inputs.release(task_id, requestor, input_id, claimer)

    async def answer_input(
        self, task_id: str, requestor: str, input_id: str, answer: dict[str, Any]
    ) -> bool:
        """Store the answer (``{"result": ...}`` or ``{"error": ...}``) for the running work
        and drop the input from the outstanding ones, in one script (``answer_input.lua``)."""
        return await self.inputs.answer(task_id, requestor, input_id, answer)

    async def take_answer(
        self, task_id: str, requestor: str, input_id: str
    ) -> dict[str, Any] | None:
        return await self.inputs.take(task_id, requestor, input_id)

    async def withdraw_input(self, task_id: str, requestor: str, input_id: str) -> None:
        await self.inputs.withdraw(task_id, requestor, input_id)

    # The input steps: each one script (``offer_input.lua``, ``answer_inputs.lua``,
    # ``resume.lua``), its status move made as ``transition.lua`` makes it (``set_status``
    # in ``_prelude.lua``), so no instance sees the task working while an input request of
    # its work is outstanding.

    async def offer_input(
        self,
        task_id: str,
        requestor: str,
        item: dict[str, Any],
        *,
        now: float,
        status_message: str | None,
    ) -> TaskRecord | None:
        keys = self.keys.task_keys(self.keys.tag(requestor), task_id)
        args = [
            task_id, item["id"], dumps(item), self.keys.channel, repr(float(now)),
            status_message or "", WORKING.value, INPUT_REQUIRED.value,
        ]  # fmt: skip
        reply = await self._run.eval(OFFER_INPUT, keys, args)
        return decode(as_dict(reply), task_id) if reply else None

    async def answer_inputs(
        self, task_id: str, requestor: str, answers: Mapping[str, dict[str, Any]], *, now: float
    ) -> tuple[set[str], TaskRecord | None]:
        if not answers:
            return set(), None
        keys = self.keys.task_keys(self.keys.tag(requestor), task_id)
        args: list[Any] = [
            task_id, self.keys.channel, repr(float(now)), INPUT_REQUIRED.value, WORKING.value,
        ]  # fmt: skip
        for key, answer in answers.items():
            args += [key, dumps(answer)]
        moved, *taken = [text(r) for r in await self._run.eval(ANSWER_INPUTS, keys, args)]
        return set(taken), decode(as_dict(moved), task_id)

    async def resume(self, task_id: str, requestor: str, *, now: float) -> TaskRecord | None:
        keys = self.keys.task_keys(self.keys.tag(requestor), task_id)
        args = [task_id, self.keys.channel, repr(float(now)), INPUT_REQUIRED.value, WORKING.value]
        reply = await self._run.eval(RESUME, keys, args)
        return decode(as_dict(reply), task_id) if reply else None

    # ------------------------------------------------------------------ change events

    def watch(self, task_id: str) -> TaskWatchHandle:
        """Wake-ups for one task from any instance (a context manager; see ``TaskWatchHandle``).

        Without ``start`` (no listener) ``wait`` simply times out: callers poll."""
        return self.events.watch(task_id)

    # ------------------------------------------------------------------ background work

    async def _heartbeat(self) -> None:
        while True:
            try:
                await self.leases.heartbeat()
                await self._secret.refresh()
            except StoreUnavailable:
                pass  # logged once per outage
            await anyio.sleep(self.leases.interval_s)

    async def start(self, tg: anyio.abc.TaskGroup) -> None:
        """Run the change listener and this instance's heartbeat in ``tg``. Reaping the
        leases of dead instances is the engine's: it calls ``recover`` every sweep."""
        if self._started:
            return
        self._started = True
        try:
            await self.leases.heartbeat()
        except StoreUnavailable:
            pass  # logged; the heartbeat loop retries
        tg.start_soon(self.events.listen)
        tg.start_soon(self._heartbeat)

    async def __aenter__(self) -> RedisTaskStore:
        tg = await open_group()
        self._tg = tg
        await self.start(tg)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Stop background work, drop this instance's lease (its unfinished tasks were
        already failed by the engine; one that was not keeps the lease, to expire), close
        the connection pool if the store made it.
        """
        tg, self._tg = self._tg, None
        await close_group(tg)
        if self._started:
            self._started = False
            with anyio.CancelScope(shield=True), anyio.move_on_after(2):
                try:
                    await self.leases.forget()
                except Exception:
                    pass
        self._run.close()
        if self._owns_client:
            with anyio.CancelScope(shield=True):
                await self.redis.aclose()
