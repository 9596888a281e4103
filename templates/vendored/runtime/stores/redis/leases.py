"""Leases: which instance runs which task, and failing the tasks of a dead instance.

A started store heartbeats its instance every ``lease_s / 5``. Each non-terminal task is in
its owner's ``owned`` set. ``reap`` (the engine calls it every sweep, through
``RedisTaskStore.recover``) finds instances silent for longer than ``lease_s`` and marks
their non-terminal tasks ``failed``; any instance may reap, and failing a task twice is a
no-op.

Silence is judged by the store clock (``store_clock`` in ``scripts/_prelude.lua``): Redis
server time (instances need no common clock) as the instances could see it. A gap of more
than ``lease_s / 3`` between two contacts of any instance was an outage: the clock stands
still over it, and no instance is reaped until a whole lease of clock has passed since it
ended, so every instance alive through an outage, however long, has a full lease of
working store to heartbeat in. A dead instance's tasks fail within ``lease_s`` of store
clock after its last heartbeat (or after the end of an outage), plus one sweep.
"""

from __future__ import annotations

import logging

from ....errors import InternalError
from ....protocol import FAILED
from ....store import TaskRecord
from .codec import TERMINAL_VALUES, as_dict, decode, dumps, text
from .keys import Keys
from .scripting import FAIL_OWNED, FORGET_DEAD, HEARTBEAT, LIST_DEAD, Call, ScriptRunner

log = logging.getLogger(__name__.rpartition(".")[0])

#: Tasks failed per pipeline while reaping.
_BATCH = 500


class Leases:
    def __init__(self, run: ScriptRunner, keys: Keys, instance_id: str, lease_s: float) -> None:
        self._run = run
        self._keys = keys
        self.instance_id = instance_id
        self.lease_s = lease_s

    @property
    def _lease_ms(self) -> int:
        return int(self.lease_s * 1000)

    @property
    def _gap_ms(self) -> int:
        """The longest gap between two contacts that is not an outage (``lease_s / 3``,
        more than the heartbeat interval ``lease_s / 5`` of every live instance)."""
        return max(1, int(self.lease_s * 1000 / 3))

    @property
    def interval_s(self) -> float:
        """How often a started store heartbeats."""
        return self.lease_s / 5

    def member(self, tag: str, task_id: str) -> str:
        """A task in an ``owned`` set."""
        return f"{tag}:{task_id}"

    async def heartbeat(self) -> None:
        keys = [self._keys.instances, self._keys.clock]
        await self._run.eval(HEARTBEAT, keys, [self.instance_id, self._gap_ms])

    async def forget(self) -> bool:
        """Drop this instance's lease as it closes (its tasks are settled), unless it still
        owns unfinished tasks (an outcome the store did not take before the engine stopped):
        the lease then runs out and another instance fails them, rather than leaving them
        ``working``. True when dropped."""
        owned = self._keys.owned(self.instance_id)
        left = await self._run.command("SCARD", owned)
        if left:
            log.warning(
                "instance %s closes with %s unfinished tasks: its lease is left to expire"
                " (another instance then marks them failed)",
                self.instance_id,
                left,
            )
            return False
        await self._run.pipeline(
            [
                (None, ["ZREM", self._keys.instances, self.instance_id]),
                (None, ["DEL", owned]),
            ]
        )
        return True

    async def reap(self, now: float, message: str) -> list[TaskRecord]:
        """Fail the non-terminal tasks of instances whose lease expired, with ``message``
        and an internal error; tasks of live instances are untouched."""
        keys = [self._keys.instances, self._keys.clock]
        dead = await self._run.eval(
            LIST_DEAD, keys, [self._lease_ms, self.instance_id, self._gap_ms]
        )
        error = dumps(InternalError(message=message).to_error())
        out: list[TaskRecord] = []
        for inst in dead:
            out += await self._reap_instance(text(inst), now, message, error)
        return out

    async def _reap_instance(
        self, inst: str, now: float, message: str, error: str
    ) -> list[TaskRecord]:
        owned = self._keys.owned(inst)
        members = [text(m) for m in await self._run.command("SMEMBERS", owned)]
        calls: list[Call] = []
        ids: list[str] = []
        for m in members:
            tag, tid = m.split(":", 1)
            ids.append(tid)
            args = [
                tid, inst, repr(float(now)), message, error, FAILED.value,
                self._keys.channel, TERMINAL_VALUES,
            ]  # fmt: skip
            calls.append((FAIL_OWNED, [self._keys.task_keys(tag, tid), args]))
        out: list[TaskRecord] = []
        for i in range(0, len(calls), _BATCH):
            replies = await self._run.pipeline(calls[i : i + _BATCH])
            for tid, flat in zip(ids[i : i + _BATCH], replies, strict=True):
                rec = decode(as_dict(flat or []), tid)
                if rec is not None:
                    out.append(rec)
        # Forgotten only now: a reaper that dies midway leaves the instance for the next.
        keys = [self._keys.instances, self._keys.clock]
        if await self._run.eval(FORGET_DEAD, keys, [self._lease_ms, inst, self._gap_ms]):
            await self._run.command("DEL", owned)
        elif members:  # it came back meanwhile: keep what it started since
            await self._run.command("SREM", owned, *members)
        log.warning(
            "instance %s stopped heartbeating: its unfinished tasks are marked failed",
            inst,
        )
        return out
