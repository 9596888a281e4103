"""Leases: which instance runs which task, and failing the tasks of a dead instance.

A started store heartbeats its instance every ``lease_s / 3`` (Redis server time, so
instances need no common clock). Each non-terminal task is in its owner's ``owned``
set. ``reap`` (the engine calls it every sweep, through ``RedisTaskStore.recover``)
finds instances silent for longer than ``lease_s`` and marks their non-terminal tasks
``failed``; any instance may reap, and failing a task twice is a no-op.
"""

from __future__ import annotations

import logging

from ...errors import InternalError
from ...protocol import FAILED
from ...store import TaskRecord
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

    def member(self, tag: str, task_id: str) -> str:
        """A task in an ``owned`` set."""
        return f"{tag}:{task_id}"

    async def heartbeat(self) -> None:
        await self._run.eval(HEARTBEAT, [self._keys.instances], [self.instance_id])

    def forget_call(self) -> list[Call]:
        """Drop this instance's lease (when it closes: its tasks are already settled)."""
        return [
            (None, ["ZREM", self._keys.instances, self.instance_id]),
            (None, ["DEL", self._keys.owned(self.instance_id)]),
        ]

    async def reap(self, now: float, message: str) -> list[TaskRecord]:
        """Fail the non-terminal tasks of instances whose lease expired, with ``message``
        and an internal error; tasks of live instances are untouched."""
        dead = await self._run.eval(
            LIST_DEAD, [self._keys.instances], [self._lease_ms, self.instance_id]
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
        if await self._run.eval(FORGET_DEAD, [self._keys.instances], [self._lease_ms, inst]):
            await self._run.command("DEL", owned)
        elif members:  # it came back meanwhile: keep what it started since
            await self._run.command("SREM", owned, *members)
        log.warning(
            "instance %s stopped heartbeating: its unfinished tasks are marked failed",
            inst,
        )
        return out
