"""The cursor secret shared by every instance of a namespace (``NS:cursor-secret``).

Made by the first instance that asks (``SET NX``). A Redis that lost its data (restart
without persistence, ``FLUSHALL``) loses it: the first instance to ask again makes a new
one and all the others adopt it without a restart, because the cached copy is dropped
when an outage begins or the change listener resubscribes, and re-read on every
heartbeat. Cursors issued before the loss become invalid.
"""

from __future__ import annotations

import secrets

from .codec import text
from .keys import Keys
from .scripting import ScriptRunner


class SharedSecret:
    def __init__(self, run: ScriptRunner, keys: Keys) -> None:
        self._run = run
        self._key = keys.secret
        self._value: bytes | None = None
        self._generation = 0

    def forget(self) -> None:
        """The cached copy may be stale: read it again on next use."""
        self._value = None
        self._generation += 1

    async def get(self) -> bytes:
        """The current secret: no round trip while cached, else one."""
        if self._value is not None:
            return self._value
        generation = self._generation
        _, raw = await self._run.pipeline(
            [
                (None, ["SET", self._key, secrets.token_hex(32), "NX"]),
                (None, ["GET", self._key]),
            ]
        )
        value = bytes.fromhex(text(raw))
        if generation == self._generation:  # not forgotten meanwhile
            self._value = value
        return value

    async def refresh(self) -> None:
        """Adopt the secret in Redis now (another instance may have made a new one)."""
        if self._value is None:
            return
        generation = self._generation
        raw = await self._run.command("GET", self._key)
        if generation == self._generation:
            self._value = None if raw is None else bytes.fromhex(text(raw))
