"""Every Redis round trip of the store: Lua scripts, commands and pipelines.

Auto-pipelining: the calls of concurrent tasks that wait while a pipeline is out are sent
together in the next one (one round trip per tick, on one connection at a time), so the
per-command cost of the client (packing, pool, syscalls, wake-ups) is shared. Pipelines go
out on the store's own connection (``wire.py``: hiredis packs and parses), or through
redis-py's pipeline for a client that connection cannot speak for.

The scripts are ``scripts/NAME.lua`` (package data, read with ``importlib.resources``);
``scripts/_prelude.lua`` (shared helpers such as ``now_ms()``) is prepended to each one.
Scripts run by ``EVALSHA``; a Redis that lost them (restart, ``SCRIPT FLUSH``) gets them
loaded again.

Failures: every Redis error leaves here as ``errors.StoreUnavailable`` with a plain,
client-safe message; the address and the exception go to the log (``WARNING``, once per
outage, and once when Redis answers again). redis-py reconnects on the next call, so the
store recovers by itself when Redis is back.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any

from redis.exceptions import DataError, NoScriptError, RedisError

from ....errors import StoreUnavailable
from ...observe import store_retry
from ..batching import GroupSender, Queued
from .wire import Wire, pack

log = logging.getLogger(__name__.rpartition(".")[0])

_SCRIPTS = resources.files(__name__.rpartition(".")[0]).joinpath("scripts")


@dataclass(frozen=True)
class Script:
    """One Lua script: its name (``scripts/NAME.lua``), full source and ``SHA1``."""

    name: str
    source: str
    sha: str


def load(name: str) -> Script:
    prelude = _SCRIPTS.joinpath("_prelude.lua").read_text(encoding="utf-8")
    source = prelude + _SCRIPTS.joinpath(f"{name}.lua").read_text(encoding="utf-8")
    return Script(name, source, hashlib.sha1(source.encode()).hexdigest())


CREATE = load("create")
TRANSITION = load("transition")
SET_TTL = load("set_ttl")
GET = load("get")
LIST = load("list")
REMOVE = load("remove")
HEARTBEAT = load("heartbeat")
LIST_DEAD = load("list_dead")
FORGET_DEAD = load("forget_dead")
FAIL_OWNED = load("fail_owned")
PUT_INPUT = load("put_input")
CLAIM_INPUTS = load("claim_inputs")
RELEASE_INPUT = load("release_input")
ANSWER_INPUT = load("answer_input")
TAKE_ANSWER = load("take_answer")
WITHDRAW_INPUT = load("withdraw_input")
OFFER_INPUT = load("offer_input")
ANSWER_INPUTS = load("answer_inputs")
RESUME = load("resume")

#: One pipelined call: ``(script, [keys, args])``, or ``(None, [command, *args])``.
Call = tuple[Script | None, list[Any]]


def _packed(script: Script | None, a: list[Any]) -> bytes:
    """One call of a pipeline in Redis' protocol: a command, or ``EVALSHA`` of a script."""
    if script is None:
        return pack(a)
    keys, args = a
    return pack(["EVALSHA", script.sha, len(keys), *keys, *args])


class _Batch(Queued):
    """One caller's calls; its outcome is their replies (or the error) once their pipeline
    returned."""

    __slots__ = ("calls",)

    def __init__(self, calls: list[Call]) -> None:
        super().__init__()
        self.calls = calls


class ScriptRunner(GroupSender[_Batch]):
    """Runs commands, scripts and pipelines on one client; counts round trips."""

    def __init__(self, client: Any, where: str) -> None:
        super().__init__()
        self.redis: Any = client
        #: The Redis address for the log (never for clients: it may say too much).
        self.where = where
        #: Round trips issued (commands and pipelines), for benchmarks.
        self.round_trips = 0
        #: Called once when an outage begins (e.g. to forget cached shared state).
        self.on_down: list[Callable[[], None]] = []
        self._down = False
        self._loaded: set[str] = set()
        #: Pipelines actually sent (several callers' round trips may share one).
        self.sent = 0
        #: Commands in them (each script call is one).
        self.commands = 0
        #: The store's own connection, or None: redis-py's pipelines (``wire.py``).
        self._wire = Wire.of(client)

    def close(self) -> None:
        """Close the store's own connection (the client's pool is its owner's)."""
        if self._wire is not None:
            self._wire.close()

    def unavailable(self, exc: BaseException) -> StoreUnavailable:
        """The error for clients; logs what failed, once per outage."""
        if not self._down:
            self._down = True
            log.warning(
                "task store unavailable: Redis at %s: %s: %s",
                self.where,
                type(exc).__name__,
                exc,
            )
            for hook in self.on_down:
                hook()
        return StoreUnavailable()

    def _up(self) -> None:
        if self._down:
            self._down = False
            log.warning("task store available again: Redis at %s", self.where)

    async def command(self, *args: Any) -> Any:
        return (await self.pipeline([(None, list(args))]))[0]

    async def eval(self, script: Script, keys: list[str], args: list[Any]) -> Any:
        return (await self.pipeline([(script, [keys, args])]))[0]

    async def _load(self, script: Script) -> None:
        self.round_trips += 1
        await self.redis.script_load(script.source)
        self._loaded.add(script.name)

    async def pipeline(self, calls: list[Call]) -> list[Any]:
        """The replies of ``calls``, sent in one round trip together with the calls of
        every other task that is waiting meanwhile (auto-pipelining: concurrent tasks share
        round trips; a caller that is alone goes out at once)."""
        if not calls:
            return []
        self.round_trips += 1
        replies: list[Any] = await self._enqueue(_Batch(calls))
        return replies

    async def _flush(self, batch: list[_Batch]) -> None:
        calls = [c for b in batch for c in b.calls]
        try:
            out = await self._pipeline(calls)
        except (DataError, UnicodeError) as exc:
            # A value Redis' protocol cannot carry, raised while packing: nothing was sent.
            # It is one caller's: the others go again without it (never an outage).
            if len(batch) == 1:
                batch[0].exc = exc
            else:
                for b in batch:
                    await self._flush([b])
            return
        except (RedisError, OSError) as exc:
            for b in batch:
                b.exc = self.unavailable(exc)
                b.exc.__cause__ = exc
            return
        self._up()
        at = 0
        for b in batch:
            replies, at = out[at : at + len(b.calls)], at + len(b.calls)
            error = next((r for r in replies if isinstance(r, Exception)), None)
            if error is None:
                b.value = replies
            else:
                b.exc = self.unavailable(error)
                b.exc.__cause__ = error

    async def _pipeline(self, calls: list[Call]) -> list[Any]:
        for script, _ in calls:
            if script is not None and script.name not in self._loaded:
                await self._load(script)
        out = await self._send(calls)
        # A Redis that lost the scripts (restart, SCRIPT FLUSH) answered NOSCRIPT to those
        # alone: load them and send only those again (the others ran, and need not be
        # idempotent, e.g. create's SET NX).
        again = [i for i, r in enumerate(out) if isinstance(r, NoScriptError)]
        if again:
            store_retry("script")
            for i in again:
                script = calls[i][0]
                assert script is not None
                await self._load(script)
            for i, r in zip(again, await self._send([calls[i] for i in again]), strict=True):
                out[i] = r
        return out

    async def _send(self, calls: list[Call]) -> list[Any]:
        """One round trip: ``calls`` out, their replies (an error reply in its place)."""
        self.sent += 1
        self.commands += len(calls)
        wire = self._wire
        if wire is not None:
            return await wire.execute([_packed(script, a) for script, a in calls])
        pipe = self.redis.pipeline(transaction=False)
        for script, a in calls:
            if script is None:
                pipe.execute_command(*a)
            else:
                keys, args = a
                pipe.evalsha(script.sha, len(keys), *keys, *args)
        return list(await pipe.execute(raise_on_error=False))
