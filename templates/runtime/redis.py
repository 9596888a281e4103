"""``RedisTaskStore``: tasks shared by many server instances through Redis (redis-py asyncio).

Install the ``redis`` extra. Usage::

    store = RedisTaskStore("redis://127.0.0.1:6379/0", namespace="mcp-tasks")
    async with TaskEngine(store) as engine:   # the engine starts the store's background work
        ...
    await store.close()

Keys (``NS`` is the namespace; ``TAG`` is a digest of the requestor, so every key of
one requestor carries the same Redis Cluster hash tag and each Lua script touches one
slot only):

- ``NS:{TAG}:t:ID``     hash: one task (status, times, ttl, message, result, error, owner)
- ``NS:{TAG}:idx``      sorted set, all scores 0, members ``hex(created_at) + ID``: keyset
                        listing in ``(created_at, task_id)`` order with ``ZRANGEBYLEX``
- ``NS:{TAG}:active``   set of the requestor's non-terminal task IDs (``count_active``)
- ``NS:{TAG}:in:ID``    hash: pending input requests of a task (cross-instance delivery)
- ``NS:{TAG}:cl:ID``    hash: which ``tasks/result`` call claimed an input, until when
- ``NS:{TAG}:ans:ID``   hash: answers waiting for the instance running the work
- ``NS:id:ID``          the task's requestor tag (``get`` by ID; cached per instance)
- ``NS:expiry``         sorted set by ``expires_at``: ``pop_expired`` reads only what expired
- ``NS:instances``      sorted set: instance ID -> last heartbeat (Redis server time, ms)
- ``NS:owned:INSTANCE`` set: the non-terminal tasks an instance runs (lease recovery)
- ``NS:events``         pub/sub channel of task changes (cross-instance wake-ups)
- ``NS:cursor-secret``  signs ``tasks/list`` cursors alike on every instance

Status changes are Lua scripts that compare the status and write in one step on the
server, so a late completion after a cancel is a no-op on any instance (R-CANCEL-3);
each also publishes a change event. Task keys expire in Redis ``expiry_grace_s``
after the task's ttl, a backstop for when no engine sweeps; the engine's sweeper
normally removes them first through ``pop_expired``. Cost of ``pop_expired``: three
round trips per batch, work proportional to the expired tasks only.

Failures: every Redis error surfaces as ``errors.StoreUnavailable`` (JSON-RPC -32603,
"Task store unavailable: ..."); redis-py reconnects on the next call, so the store
recovers by itself when Redis is back. Leases: a started store heartbeats its
instance every ``lease_s / 3``; any instance reaps instances silent for longer than
``lease_s``, marking their non-terminal tasks ``failed``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import secrets
import socket
import struct
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Collection, Coroutine, Iterable
from typing import Any, ParamSpec, TypeVar

import anyio
import anyio.abc
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import NoScriptError, RedisError

from ..errors import StoreUnavailable
from ..lifecycle import FAILED, TERMINAL
from ..models import TaskStatus
from ..store import TaskRecord, TaskStore, TaskWatch

_PKG = __name__.rsplit(".", 2)[0]
log = logging.getLogger(f"{_PKG}.runtime.redis")

P = ParamSpec("P")
T = TypeVar("T")

_TERMINAL_VALUES = " ".join(sorted(s.value for s in TERMINAL))

#: create: KEYS task, idx, active; ARGV id, lexkey, pexpire-ms|'', active 0|1, field, value, ...
_CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 5))
if ARGV[3] ~= '' then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
redis.call('ZADD', KEYS[2], 0, ARGV[2])
if ARGV[4] == '1' then redis.call('SADD', KEYS[3], ARGV[1]) end
return 1
"""

#: transition: KEYS task, active, in, cl, ans; ARGV id, status, now, has-msg, msg, result|'',
#: error|'', channel, terminal statuses (space separated), allowed status, ...
_TRANSITION = """
local cur = redis.call('HMGET', KEYS[1], 's', 'u', 'v')
if not cur[1] then return false end
local ok = false
for i = 10, #ARGV do
  if ARGV[i] == cur[1] then ok = true break end
end
if not ok then return false end
local u = cur[2]
if tonumber(ARGV[3]) > tonumber(u) then u = ARGV[3] end
redis.call('HSET', KEYS[1], 's', ARGV[2], 'u', u, 'v', tonumber(cur[3]) + 1)
if ARGV[4] == '1' then redis.call('HSET', KEYS[1], 'msg', ARGV[5])
else redis.call('HDEL', KEYS[1], 'msg') end
if ARGV[6] ~= '' then redis.call('HSET', KEYS[1], 'res', ARGV[6]) end
if ARGV[7] ~= '' then redis.call('HSET', KEYS[1], 'err', ARGV[7]) end
if string.find(' ' .. ARGV[9] .. ' ', ' ' .. ARGV[2] .. ' ', 1, true) then
  redis.call('SREM', KEYS[2], ARGV[1])
  redis.call('DEL', KEYS[3], KEYS[4], KEYS[5])
else
  redis.call('SADD', KEYS[2], ARGV[1])
end
redis.call('PUBLISH', ARGV[8], 's ' .. ARGV[1])
return redis.call('HGETALL', KEYS[1])
"""

#: get: KEYS task
_GET = "return redis.call('HGETALL', KEYS[1])"

#: list: KEYS idx, active; ARGV task-key prefix, after lexkey|'', limit
_LIST = """
local min = '-'
if ARGV[2] ~= '' then min = '(' .. ARGV[2] end
local n = tonumber(ARGV[3])
local out = {}
while #out < n do
  local ms = redis.call('ZRANGEBYLEX', KEYS[1], min, '+', 'LIMIT', 0, n - #out)
  if #ms == 0 then break end
  for _, m in ipairs(ms) do
    local id = string.sub(m, 17)
    local h = redis.call('HGETALL', ARGV[1] .. id)
    if #h == 0 then
      redis.call('ZREM', KEYS[1], m)
      redis.call('SREM', KEYS[2], id)
    else
      out[#out + 1] = h
    end
  end
  min = '(' .. ms[#ms]
end
return out
"""

#: delete / expire: KEYS task, idx, active, in, cl, ans; ARGV id, lexkey, now|'' (expire only
#: when expired by then), channel|'' (expiry publishes nothing: the sweeping engine wakes its
#: own waiters after remembering the task as expired; other instances notice on their next poll)
_REMOVE = """
local h = redis.call('HGETALL', KEYS[1])
if #h > 0 and ARGV[3] ~= '' then
  local x = redis.call('HGET', KEYS[1], 'x')
  if (not x) or tonumber(x) > tonumber(ARGV[3]) then return {} end
end
local lex = ARGV[2]
if #h > 0 then lex = redis.call('HGET', KEYS[1], 'k') end
redis.call('DEL', KEYS[1], KEYS[4], KEYS[5], KEYS[6])
if lex ~= '' then redis.call('ZREM', KEYS[2], lex) end
redis.call('SREM', KEYS[3], ARGV[1])
if #h > 0 and ARGV[4] ~= '' then redis.call('PUBLISH', ARGV[4], 'd ' .. ARGV[1]) end
return h
"""

#: heartbeat: KEYS instances; ARGV instance -> server time in ms
_HEARTBEAT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now, ARGV[1])
return now
"""

#: instances whose lease expired: KEYS instances; ARGV lease-ms, self -> instance IDs.
#: They are forgotten only after their tasks are failed (_FORGET_DEAD): a reaper that dies
#: midway leaves them for the next one (failing a task twice is a no-op).
_LIST_DEAD = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local dead = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[1]), 'LIMIT', 0, 100)
local out = {}
for _, d in ipairs(dead) do
  if d ~= ARGV[2] then out[#out + 1] = d end
end
return out
"""

#: forget a reaped instance unless it heartbeated meanwhile: KEYS instances; ARGV lease-ms, id
_FORGET_DEAD = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local score = redis.call('ZSCORE', KEYS[1], ARGV[2])
if score and tonumber(score) <= now - tonumber(ARGV[1]) then
  redis.call('ZREM', KEYS[1], ARGV[2])
  return 1
end
return 0
"""

#: fail a dead owner's task: KEYS task, active, in, cl, ans; ARGV id, owner, now, msg, error,
#: failed, channel, terminal statuses
_FAIL_OWNED = """
local cur = redis.call('HMGET', KEYS[1], 's', 'u', 'v', 'o')
if not cur[1] or cur[4] ~= ARGV[2] then return false end
if string.find(' ' .. ARGV[8] .. ' ', ' ' .. cur[1] .. ' ', 1, true) then return false end
local u = cur[2]
if tonumber(ARGV[3]) > tonumber(u) then u = ARGV[3] end
redis.call('HSET', KEYS[1], 's', ARGV[6], 'u', u, 'v', tonumber(cur[3]) + 1, 'msg', ARGV[4])
if redis.call('HEXISTS', KEYS[1], 'err') == 0 then redis.call('HSET', KEYS[1], 'err', ARGV[5]) end
redis.call('SREM', KEYS[2], ARGV[1])
redis.call('DEL', KEYS[3], KEYS[4], KEYS[5])
redis.call('PUBLISH', ARGV[7], 's ' .. ARGV[1])
return redis.call('HGETALL', KEYS[1])
"""

#: put input: KEYS task, in; ARGV id, input id, json, channel
_PUT_INPUT = """
local ttl = redis.call('PTTL', KEYS[1])
if ttl == -2 then return 0 end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
redis.call('PUBLISH', ARGV[4], 'i ' .. ARGV[1])
return 1
"""

#: claim inputs: KEYS in, cl; ARGV claimer, lease-ms -> flat list of claimed input JSON
_CLAIM_INPUTS = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local all = redis.call('HGETALL', KEYS[1])
local out = {}
for i = 1, #all, 2 do
  local c = redis.call('HGET', KEYS[2], all[i])
  local free = true
  if c then
    local sep = string.find(c, ' ', 1, true)
    local until_ms = tonumber(string.sub(c, 1, sep - 1))
    if until_ms > now and string.sub(c, sep + 1) ~= ARGV[1] then free = false end
  end
  if free then
    redis.call('HSET', KEYS[2], all[i], (now + tonumber(ARGV[2])) .. ' ' .. ARGV[1])
    out[#out + 1] = all[i + 1]
  end
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
return out
"""

#: release a claim: KEYS cl; ARGV input id, claimer, id, channel
_RELEASE_INPUT = """
local c = redis.call('HGET', KEYS[1], ARGV[1])
if c and string.sub(c, string.find(c, ' ', 1, true) + 1) == ARGV[2] then
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('PUBLISH', ARGV[4], 'i ' .. ARGV[3])
end
return 1
"""

#: answer: KEYS in, cl, ans; ARGV input id, answer json, id, channel
_ANSWER_INPUT = """
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then redis.call('PEXPIRE', KEYS[3], ttl) end
redis.call('PUBLISH', ARGV[4], 'a ' .. ARGV[3])
return 1
"""

#: take an answer: KEYS ans; ARGV input id
_TAKE_ANSWER = """
local a = redis.call('HGET', KEYS[1], ARGV[1])
if a then redis.call('HDEL', KEYS[1], ARGV[1]) end
return a
"""

#: withdraw an input nobody answered: KEYS in, cl, ans; ARGV input id
_WITHDRAW_INPUT = """
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
return 1
"""


def _lexkey(created_at: float, task_id: str) -> str:
    """16 hex digits ordering like the float, then the ID: byte order == (created_at, id)."""
    (bits,) = struct.unpack(">Q", struct.pack(">d", created_at))
    bits = bits ^ 0xFFFFFFFFFFFFFFFF if bits >> 63 else bits | (1 << 63)
    return f"{bits:016x}{task_id}"


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _num(text: str) -> int | None:
    return None if text == "" else int(text)


def _decode(flat: Iterable[Any], task_id: str) -> TaskRecord | None:
    items = [_s(v) for v in flat]
    if not items:
        return None
    h = dict(zip(items[::2], items[1::2], strict=True))
    res, err = h.get("res"), h.get("err")
    return TaskRecord(
        task_id=task_id,
        requestor=h["r"],
        method=h["m"],
        status=TaskStatus(h["s"]),
        created_at=float(h["c"]),
        last_updated_at=float(h["u"]),
        ttl_ms=_num(h.get("ttl", "")),
        poll_interval_ms=_num(h.get("pi", "")),
        status_message=h.get("msg"),
        result=None if res is None else json.loads(res),
        error=None if err is None else json.loads(err),
        version=int(h.get("v", "0")),
    )


def _owner_of(flat: Iterable[Any]) -> str | None:
    items = [_s(v) for v in flat]
    return dict(zip(items[::2], items[1::2], strict=True)).get("o")


class TaskWatchHandle(TaskWatch):
    """A subscription to one task's change events (see ``RedisTaskStore.watch``).

    Enter it before reading the task, then ``await wait(timeout)``: returns True as
    soon as a change event for the task arrived since the last wait (from any
    instance), False after ``timeout`` (the fallback poll when a message was missed)."""

    def __init__(self, store: RedisTaskStore, task_id: str) -> None:
        self._store = store
        self.task_id = task_id
        self._event = anyio.Event()
        self._fired = False

    def fire(self) -> None:
        self._fired = True
        self._event.set()

    async def wait(self, timeout: float) -> bool:
        if not self._fired:
            with anyio.move_on_after(timeout):
                await self._event.wait()
        fired, self._fired = self._fired, False
        if self._event.is_set():
            self._event = anyio.Event()
        return fired

    def __enter__(self) -> TaskWatchHandle:
        self._store._watchers.setdefault(self.task_id, set()).add(self)
        return self

    def __exit__(self, *exc: object) -> None:
        ws = self._store._watchers.get(self.task_id)
        if ws is not None:
            ws.discard(self)
            if not ws:
                del self._store._watchers[self.task_id]


def _unavailable(
    fn: Callable[P, Coroutine[Any, Any, T]],
) -> Callable[P, Coroutine[Any, Any, T]]:
    """Redis errors leave the store as ``StoreUnavailable`` (-32603) with what failed."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await fn(*args, **kwargs)
        except RedisError as exc:
            self = args[0]
            assert isinstance(self, RedisTaskStore)
            log.warning(
                "task store unavailable: Redis at %s: %s: %s", self.where, type(exc).__name__, exc
            )
            raise StoreUnavailable() from exc
        except OSError as exc:
            self = args[0]
            assert isinstance(self, RedisTaskStore)
            log.warning(
                "task store unavailable: Redis at %s: %s: %s", self.where, type(exc).__name__, exc
            )
            raise StoreUnavailable() from exc

    return wrapper


class RedisTaskStore(TaskStore):
    """Tasks in Redis, shared by every engine that uses the same Redis and namespace."""

    #: Other processes may change tasks: the engine waits on ``watch`` instead of polling.
    shared = True

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
        if not namespace or any(c in namespace for c in "{}"):
            raise ValueError("namespace must be non-empty and contain no '{' or '}'")
        if client is None:
            assert url is not None
            client = aioredis.Redis.from_url(
                url,
                decode_responses=True,
                socket_timeout=socket_timeout_s,
                socket_connect_timeout=min(socket_timeout_s, 2.0),
                retry=Retry(ExponentialBackoff(cap=0.2, base=0.02), 2),
                health_check_interval=30,
            )
            self._owns_client = True
            self.where = url.split("://", 1)[-1].split("@")[-1]  # no password in messages
        else:
            self._owns_client = False
            self.where = repr(client)
        self.redis: Any = client
        self.ns = namespace
        self.lease_s = lease_s
        self.expiry_grace_s = expiry_grace_s
        self.instance_id = instance_id or (
            f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        )
        self.channel = f"{namespace}:events"
        self._expiry_key = f"{namespace}:expiry"
        self._instances_key = f"{namespace}:instances"
        self._tags: dict[str, str] = {}
        self._watchers: dict[str, set[TaskWatchHandle]] = {}
        self._sha: dict[str, str] = {}
        self._started = False
        self._tg: anyio.abc.TaskGroup | None = None
        #: Called with the records the lease reaper failed (the engine emits notifications).
        self.on_reaped: Callable[[list[TaskRecord]], Awaitable[None]] | None = None
        #: Round trips issued (commands and pipelines), for benchmarks.
        self.round_trips = 0

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

    # ------------------------------------------------------------------ keys

    @staticmethod
    def tag(requestor: str) -> str:
        return hashlib.sha256(requestor.encode()).hexdigest()[:24]

    def _k(self, tag: str, kind: str, task_id: str = "") -> str:
        return f"{self.ns}:{{{tag}}}:{kind}{task_id}"

    def _task_keys(self, tag: str, task_id: str) -> list[str]:
        return [
            self._k(tag, "t:", task_id),
            self._k(tag, "active"),
            self._k(tag, "in:", task_id),
            self._k(tag, "cl:", task_id),
            self._k(tag, "ans:", task_id),
        ]

    def _ptr(self, task_id: str) -> str:
        return f"{self.ns}:id:{task_id}"

    def _owned(self, instance: str) -> str:
        return f"{self.ns}:owned:{instance}"

    # ------------------------------------------------------------------ scripts

    async def _eval(self, src: str, keys: list[str], args: list[Any]) -> Any:
        sha = self._sha.get(src)
        self.round_trips += 1
        if sha is not None:
            try:
                return await self.redis.evalsha(sha, len(keys), *keys, *args)
            except NoScriptError:
                pass  # Redis restarted (or SCRIPT FLUSH): load it again
        self._sha[src] = _s(await self.redis.script_load(src))
        self.round_trips += 1
        return await self.redis.evalsha(self._sha[src], len(keys), *keys, *args)

    async def _pipeline(self, calls: list[tuple[str | None, list[Any]]]) -> list[Any]:
        """One round trip: ``(script, keys+args)`` pairs, or ``(None, [command, *args])``."""
        if not calls:
            return []
        for src, _ in calls:
            if src is not None and src not in self._sha:
                self._sha[src] = _s(await self.redis.script_load(src))
                self.round_trips += 1
        for attempt in (0, 1):
            pipe = self.redis.pipeline(transaction=False)
            for src, a in calls:
                if src is None:
                    pipe.execute_command(*a)
                else:
                    keys, args = a
                    pipe.evalsha(self._sha[src], len(keys), *keys, *args)
            self.round_trips += 1
            out = await pipe.execute(raise_on_error=False)
            if attempt == 0 and any(isinstance(r, NoScriptError) for r in out):
                for src, _ in calls:
                    if src is not None:
                        self._sha[src] = _s(await self.redis.script_load(src))
                        self.round_trips += 1
                continue  # every pipelined command is idempotent
            for r in out:
                if isinstance(r, Exception):
                    raise r
            return list(out)
        raise AssertionError("unreachable")

    async def _tag_of(self, task_id: str, *, fresh: bool = False) -> str | None:
        if not fresh:
            tag = self._tags.get(task_id)
            if tag is not None:
                return tag
        self.round_trips += 1
        raw = await self.redis.get(self._ptr(task_id))
        if raw is None:
            self._tags.pop(task_id, None)
            return None
        tag = _s(raw)
        if len(self._tags) >= 100_000:
            self._tags.clear()
        self._tags[task_id] = tag
        return tag

    # ------------------------------------------------------------------ TaskStore

    @_unavailable
    async def create(self, record: TaskRecord) -> None:
        tag = self.tag(record.requestor)
        tid = record.task_id
        px = (
            None
            if record.ttl_ms is None
            else max(1, int(record.ttl_ms + self.expiry_grace_s * 1000))
        )
        self.round_trips += 1
        if not await self.redis.set(self._ptr(tid), tag, nx=True, px=px):
            raise KeyError(tid)
        lex = _lexkey(record.created_at, tid)
        active = record.status not in TERMINAL
        fields: list[Any] = [
            "r", record.requestor, "m", record.method, "s", record.status.value,
            "c", repr(record.created_at), "u", repr(record.last_updated_at),
            "ttl", "" if record.ttl_ms is None else str(record.ttl_ms),
            "pi", "" if record.poll_interval_ms is None else str(record.poll_interval_ms),
            "v", str(record.version), "k", lex,
        ]  # fmt: skip
        expires = record.expires_at
        if expires is not None:
            fields += ["x", repr(expires)]
        if record.status_message is not None:
            fields += ["msg", record.status_message]
        if record.result is not None:
            fields += ["res", _json(record.result)]
        if record.error is not None:
            fields += ["err", _json(record.error)]
        if active:
            fields += ["o", self.instance_id]
        keys = [self._k(tag, "t:", tid), self._k(tag, "idx"), self._k(tag, "active")]
        calls: list[tuple[str | None, list[Any]]] = [
            (_CREATE, [keys, [tid, lex, "" if px is None else px, int(active), *fields]])
        ]
        if expires is not None:
            calls.append((None, ["ZADD", self._expiry_key, repr(expires), f"{tag}:{lex}"]))
        if active:
            calls.append((None, ["SADD", self._owned(self.instance_id), f"{tag}:{tid}"]))
        try:
            out = await self._pipeline(calls)
        except BaseException:
            with anyio.CancelScope(shield=True):
                try:
                    await self.redis.delete(self._ptr(tid))
                except Exception:  # the pointer expires with the task anyway
                    pass
            raise
        if out[0] == 0:
            raise KeyError(tid)
        self._tags[tid] = tag

    @_unavailable
    async def get(self, task_id: str) -> TaskRecord | None:
        tag = await self._tag_of(task_id)
        if tag is None:
            return None
        rec = _decode(await self._eval(_GET, [self._k(tag, "t:", task_id)], []), task_id)
        if rec is None and task_id in self._tags:
            # A stale cached tag (the ID was deleted and reused): ask the pointer once.
            tag2 = await self._tag_of(task_id, fresh=True)
            if tag2 is not None and tag2 != tag:
                rec = _decode(await self._eval(_GET, [self._k(tag2, "t:", task_id)], []), task_id)
        return rec

    @_unavailable
    async def transition(
        self,
        task_id: str,
        status: TaskStatus,
        *,
        now: float,
        expected: Collection[TaskStatus] | None = None,
        status_message: str | None = None,
        result: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
    ) -> TaskRecord | None:
        allowed = [s.value for s in (self.sources(status) if expected is None else expected)]
        if not allowed:
            return None
        # Serialised first: a result that is not JSON fails here, changing nothing.
        res = "" if result is None else _json(result)
        err = "" if error is None else _json(error)
        tag = await self._tag_of(task_id)
        if tag is None:
            return None
        args = [
            task_id, status.value, repr(float(now)), int(status_message is not None),
            status_message or "", res, err, self.channel, _TERMINAL_VALUES, *allowed,
        ]  # fmt: skip
        calls: list[tuple[str | None, list[Any]]] = [
            (_TRANSITION, [self._task_keys(tag, task_id), args])
        ]
        if status in TERMINAL:
            # This instance usually runs the task: drop it from its lease set in the same trip.
            calls.append((None, ["SREM", self._owned(self.instance_id), f"{tag}:{task_id}"]))
        out = await self._pipeline(calls)
        if not out[0]:
            return None
        rec = _decode(out[0], task_id)
        owner = _owner_of(out[0])
        if status in TERMINAL and owner is not None and owner != self.instance_id:
            self.round_trips += 1
            await self.redis.srem(self._owned(owner), f"{tag}:{task_id}")
        return rec

    @_unavailable
    async def list_tasks(
        self, requestor: str, *, after: tuple[float, str] | None, limit: int
    ) -> list[TaskRecord]:
        if limit <= 0:
            return []
        tag = self.tag(requestor)
        after_lex = "" if after is None else _lexkey(after[0], after[1])
        rows = await self._eval(
            _LIST,
            [self._k(tag, "idx"), self._k(tag, "active")],
            [self._k(tag, "t:"), after_lex, limit],
        )
        out: list[TaskRecord] = []
        for flat in rows:
            items = [_s(v) for v in flat]
            h = dict(zip(items[::2], items[1::2], strict=True))
            rec = _decode(items, h["k"][16:])
            if rec is not None:
                out.append(rec)
        return out

    async def _remove(
        self, tag: str, task_id: str, lex: str, now: float | None
    ) -> tuple[TaskRecord | None, str | None]:
        t, active, inp, cl, ans = self._task_keys(tag, task_id)
        flat = await self._eval(
            _REMOVE,
            [t, self._k(tag, "idx"), active, inp, cl, ans],
            [task_id, lex, "" if now is None else repr(float(now)), self.channel],
        )
        return _decode(flat, task_id), _owner_of(flat)

    @_unavailable
    async def delete(self, task_id: str) -> bool:
        tag = await self._tag_of(task_id)
        if tag is None:
            return False
        rec, owner = await self._remove(tag, task_id, "", None)
        if rec is None:
            return False
        calls: list[tuple[str | None, list[Any]]] = [(None, ["DEL", self._ptr(task_id)])]
        if rec.expires_at is not None:
            lex = _lexkey(rec.created_at, task_id)
            calls.append((None, ["ZREM", self._expiry_key, f"{tag}:{lex}"]))
        if owner is not None:
            calls.append((None, ["SREM", self._owned(owner), f"{tag}:{task_id}"]))
        await self._pipeline(calls)
        self._tags.pop(task_id, None)
        return True

    @_unavailable
    async def pop_expired(self, now: float, limit: int) -> list[TaskRecord]:
        out: list[TaskRecord] = []
        while len(out) < limit:
            want = limit - len(out)
            self.round_trips += 1
            members = [
                _s(m)
                for m in await self.redis.zrangebyscore(
                    self._expiry_key, "-inf", repr(float(now)), start=0, num=want
                )
            ]
            if not members:
                break
            calls: list[tuple[str | None, list[Any]]] = []
            ids: list[str] = []
            for m in members:
                tag, lex = m.split(":", 1)
                tid = lex[16:]
                ids.append(tid)
                t, active, inp, cl, ans = self._task_keys(tag, tid)
                calls.append(
                    (
                        _REMOVE,
                        [
                            [t, self._k(tag, "idx"), active, inp, cl, ans],
                            [tid, lex, repr(float(now)), ""],
                        ],
                    )
                )
            removed = await self._pipeline(calls)
            # Our own lease set forgets them all (a task Redis expired first is unknown here).
            mine = [f"{m.split(':', 1)[0]}:{tid}" for m, tid in zip(members, ids, strict=True)]
            cleanup: list[tuple[str | None, list[Any]]] = [
                (None, ["ZREM", self._expiry_key, *members]),
                (None, ["SREM", self._owned(self.instance_id), *mine]),
            ]
            for m, tid, flat in zip(members, ids, removed, strict=True):
                rec = _decode(flat, tid)
                if rec is None:
                    continue
                out.append(rec)
                self._tags.pop(tid, None)
                cleanup.append((None, ["DEL", self._ptr(tid)]))
                owner = _owner_of(flat)
                if owner is not None and owner != self.instance_id and rec.status not in TERMINAL:
                    cleanup.append(
                        (None, ["SREM", self._owned(owner), f"{m.split(':', 1)[0]}:{tid}"])
                    )
            await self._pipeline(cleanup)
            if len(members) < want:
                break
        return out

    @_unavailable
    async def count_active(self, requestor: str) -> int:
        self.round_trips += 1
        return int(await self.redis.scard(self._k(self.tag(requestor), "active")))

    @_unavailable
    async def recover(self, now: float, message: str) -> list[TaskRecord]:
        """Reap instances whose lease expired: their non-terminal tasks become ``failed``
        with ``message`` and a ``-32603`` error. Tasks of live instances are untouched."""
        dead = [
            _s(d)
            for d in await self._eval(
                _LIST_DEAD, [self._instances_key], [int(self.lease_s * 1000), self.instance_id]
            )
        ]
        out: list[TaskRecord] = []
        error = _json({"code": -32603, "message": message})
        for inst in dead:
            owned = self._owned(inst)
            self.round_trips += 1
            members = [_s(m) for m in await self.redis.smembers(owned)]
            calls: list[tuple[str | None, list[Any]]] = []
            ids: list[str] = []
            for m in members:
                tag, tid = m.split(":", 1)
                ids.append(tid)
                calls.append(
                    (
                        _FAIL_OWNED,
                        [
                            self._task_keys(tag, tid),
                            [
                                tid, inst, repr(float(now)), message, error, FAILED.value,
                                self.channel, _TERMINAL_VALUES,
                            ],
                        ],
                    )
                )  # fmt: skip
            for i in range(0, len(calls), 500):
                for tid, flat in zip(
                    ids[i : i + 500], await self._pipeline(calls[i : i + 500]), strict=True
                ):
                    rec = _decode(flat or [], tid)
                    if rec is not None:
                        out.append(rec)
            forgotten = await self._eval(
                _FORGET_DEAD, [self._instances_key], [int(self.lease_s * 1000), inst]
            )
            self.round_trips += 1
            if forgotten:
                await self.redis.delete(owned)
            elif members:  # it came back meanwhile: keep what it started since
                await self.redis.srem(owned, *members)
            log.warning(
                "instance %s stopped heartbeating: its unfinished tasks are marked failed", inst
            )
        return out

    @_unavailable
    async def shared_secret(self) -> bytes:
        """One random secret per namespace, made by the first instance that asks (a Redis
        that lost its data makes a new one: cursors issued before then become invalid)."""
        key = f"{self.ns}:cursor-secret"
        self.round_trips += 2
        await self.redis.set(key, secrets.token_hex(32), nx=True)
        return bytes.fromhex(_s(await self.redis.get(key)))

    # ------------------------------------------------------------------ cross-instance input

    @_unavailable
    async def put_input(self, task_id: str, requestor: str, item: dict[str, Any]) -> bool:
        """Queue an input request (``{"id", "method", "params"}``) for any ``tasks/result``."""
        tag = self.tag(requestor)
        keys = [self._k(tag, "t:", task_id), self._k(tag, "in:", task_id)]
        return bool(
            await self._eval(_PUT_INPUT, keys, [task_id, item["id"], _json(item), self.channel])
        )

    @_unavailable
    async def claim_inputs(
        self, task_id: str, requestor: str, claimer: str, lease_s: float
    ) -> list[dict[str, Any]]:
        """Input requests nobody is delivering now, claimed for ``claimer`` for ``lease_s``."""
        tag = self.tag(requestor)
        keys = [self._k(tag, "in:", task_id), self._k(tag, "cl:", task_id)]
        rows = await self._eval(_CLAIM_INPUTS, keys, [claimer, int(lease_s * 1000)])
        return [json.loads(_s(r)) for r in rows]

    @_unavailable
    async def release_input(
        self, task_id: str, requestor: str, input_id: str, claimer: str
    ) -> None:
        tag = self.tag(requestor)
        await self._eval(
            _RELEASE_INPUT,
            [self._k(tag, "cl:", task_id)],
            [input_id, claimer, task_id, self.channel],
        )

    @_unavailable
    async def answer_input(
        self, task_id: str, requestor: str, input_id: str, answer: dict[str, Any]
    ) -> bool:
        """Store the answer (``{"result": ...}`` or ``{"error": ...}``) for the running work."""
        tag = self.tag(requestor)
        keys = [
            self._k(tag, "in:", task_id),
            self._k(tag, "cl:", task_id),
            self._k(tag, "ans:", task_id),
        ]
        return bool(
            await self._eval(_ANSWER_INPUT, keys, [input_id, _json(answer), task_id, self.channel])
        )

    @_unavailable
    async def take_answer(
        self, task_id: str, requestor: str, input_id: str
    ) -> dict[str, Any] | None:
        tag = self.tag(requestor)
        raw = await self._eval(_TAKE_ANSWER, [self._k(tag, "ans:", task_id)], [input_id])
        return None if raw is None else dict(json.loads(_s(raw)))

    @_unavailable
    async def withdraw_input(self, task_id: str, requestor: str, input_id: str) -> None:
        tag = self.tag(requestor)
        keys = [
            self._k(tag, "in:", task_id),
            self._k(tag, "cl:", task_id),
            self._k(tag, "ans:", task_id),
        ]
        await self._eval(_WITHDRAW_INPUT, keys, [input_id])

    # ------------------------------------------------------------------ change events

    def watch(self, task_id: str) -> TaskWatchHandle:
        """Wake-ups for one task from any instance (a context manager; see ``TaskWatchHandle``).

        Without ``start`` (no listener) ``wait`` simply times out: callers poll."""
        return TaskWatchHandle(self, task_id)

    def _dispatch(self, data: str) -> None:
        _, _, task_id = data.partition(" ")
        for w in list(self._watchers.get(task_id, ())):
            w.fire()

    def _fire_all(self) -> None:
        for ws in list(self._watchers.values()):
            for w in list(ws):
                w.fire()

    async def _listen(self) -> None:
        """Subscribe to the change channel; reconnect with backoff (waiters re-read meanwhile)."""
        delay = 0.05
        while True:
            pubsub = self.redis.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(self.channel)
                delay = 0.05
                self._fire_all()  # anything may have changed while we were not listening
                while True:
                    msg = await pubsub.get_message(timeout=5.0)
                    if msg is not None and msg.get("type") == "message":
                        self._dispatch(_s(msg["data"]))
            except (RedisError, OSError) as exc:
                log.debug("redis listener: %s: %s", type(exc).__name__, exc)
            finally:
                with anyio.CancelScope(shield=True):
                    try:
                        await pubsub.aclose()
                    except Exception:
                        pass
            self._fire_all()
            await anyio.sleep(delay)
            delay = min(delay * 2, 2.0)

    async def _heartbeat(self) -> None:
        warned = False
        while True:
            try:
                await self._eval(_HEARTBEAT, [self._instances_key], [self.instance_id])
                warned = False
            except (RedisError, OSError) as exc:
                if not warned:
                    log.warning("redis heartbeat failed: %s: %s", type(exc).__name__, exc)
                    warned = True
            await anyio.sleep(self.lease_s / 3)

    async def _reaper(self, message: str) -> None:
        while True:
            await anyio.sleep(self.lease_s / 2)
            try:
                reaped = await self.recover(time.time(), message)
            except StoreUnavailable:
                continue
            except Exception:
                log.exception("redis lease reaper failed")
                continue
            if reaped and self.on_reaped is not None:
                try:
                    await self.on_reaped(reaped)
                except Exception:
                    log.exception("on_reaped hook failed")

    async def start(
        self,
        tg: anyio.abc.TaskGroup,
        *,
        reap: bool = False,
        reap_message: str = "Task failed: the server running it stopped responding",
    ) -> None:
        """Run the change listener and this instance's heartbeat in ``tg``; with ``reap``
        also a lease reaper (the engine reaps itself: it calls ``recover`` every sweep)."""
        if self._started:
            return
        self._started = True
        try:
            await self._eval(_HEARTBEAT, [self._instances_key], [self.instance_id])
        except (RedisError, OSError) as exc:
            log.warning("redis unavailable at start: %s: %s", type(exc).__name__, exc)
        tg.start_soon(self._listen)
        tg.start_soon(self._heartbeat)
        if reap:
            tg.start_soon(self._reaper, reap_message)

    async def __aenter__(self) -> RedisTaskStore:
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        await self.start(tg, reap=True)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Stop background work, drop this instance's lease (its unfinished tasks were
        already failed by the engine), close the connection pool if the store made it."""
        tg, self._tg = self._tg, None
        if tg is not None:
            tg.cancel_scope.cancel()
            await tg.__aexit__(None, None, None)
        if self._started:
            self._started = False
            with anyio.CancelScope(shield=True), anyio.move_on_after(2):
                try:
                    await self._pipeline(
                        [
                            (None, ["ZREM", self._instances_key, self.instance_id]),
                            (None, ["DEL", self._owned(self.instance_id)]),
                        ]
                    )
                except Exception:
                    pass
        if self._owns_client:
            with anyio.CancelScope(shield=True):
                await self.redis.aclose()
