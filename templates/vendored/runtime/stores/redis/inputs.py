"""Input hand-over between instances: the work on instance A asks for input (an
elicitation or a sampling request); the result stream a client holds on any instance
claims it, delivers it to the client and stores the answer, which A then takes.

Keys per task (``keys.py``): ``in`` pending requests, ``cl`` claims (``until-ms claimer``),
``ans`` answers. A terminal status change deletes all three. Answering removes the input
from ``in`` and stores its answer in one script: the next read of the outstanding
inputs on any instance no longer lists it.
"""

from __future__ import annotations

import json
from typing import Any

from .codec import dumps, text
from .keys import Keys
from .scripting import (
    ANSWER_INPUT,
    CLAIM_INPUTS,
    PUT_INPUT,
    RELEASE_INPUT,
    TAKE_ANSWER,
    WITHDRAW_INPUT,
    ScriptRunner,
)


class Inputs:
    def __init__(self, run: ScriptRunner, keys: Keys) -> None:
        self._run = run
        self._keys = keys

    async def put(self, task_id: str, requestor: str, item: dict[str, Any]) -> bool:
        tag = self._keys.tag(requestor)
        keys = [self._keys.task(tag, task_id), self._keys.inputs(tag, task_id)[0]]
        args = [task_id, item["id"], dumps(item), self._keys.channel]
        return bool(await self._run.eval(PUT_INPUT, keys, args))

    async def pending(self, task_id: str, requestor: str) -> list[dict[str, Any]]:
        """Every outstanding input (claimed or not), oldest first (by ``seq``)."""
        pending, _, _ = self._keys.inputs(self._keys.tag(requestor), task_id)
        items = [json.loads(text(r)) for r in await self._run.command("HVALS", pending)]
        return sorted(items, key=lambda i: i.get("seq") if isinstance(i.get("seq"), int) else 0)

    async def claim(
        self, task_id: str, requestor: str, claimer: str, lease_s: float
    ) -> list[dict[str, Any]]:
        pending, claims, _ = self._keys.inputs(self._keys.tag(requestor), task_id)
        rows = await self._run.eval(CLAIM_INPUTS, [pending, claims], [claimer, int(lease_s * 1000)])
        return [json.loads(text(r)) for r in rows]

    async def release(self, task_id: str, requestor: str, input_id: str, claimer: str) -> None:
        _, claims, _ = self._keys.inputs(self._keys.tag(requestor), task_id)
        args = [input_id, claimer, task_id, self._keys.channel]
        await self._run.eval(RELEASE_INPUT, [claims], args)

    async def answer(
        self, task_id: str, requestor: str, input_id: str, answer: dict[str, Any]
    ) -> bool:
        keys = self._keys.inputs(self._keys.tag(requestor), task_id)
        args = [input_id, dumps(answer), task_id, self._keys.channel]
        return bool(await self._run.eval(ANSWER_INPUT, keys, args))

    async def take(self, task_id: str, requestor: str, input_id: str) -> dict[str, Any] | None:
        _, _, answers = self._keys.inputs(self._keys.tag(requestor), task_id)
        raw = await self._run.eval(TAKE_ANSWER, [answers], [input_id])
        return None if raw is None else dict(json.loads(text(raw)))

    async def withdraw(self, task_id: str, requestor: str, input_id: str) -> None:
        keys = self._keys.inputs(self._keys.tag(requestor), task_id)
        await self._run.eval(WITHDRAW_INPUT, keys, [input_id])
