"""Group sending: the calls of concurrent tasks that arrive while one batch is out go together
in the next one, sent by the first of them (the Redis store's auto-pipelining, the SQLite
store's group commit).

Whoever finds nothing out sends the queue; items queued meanwhile form the next batch, handed
to its first caller. Waits are shielded: a cancelled caller's item, once queued, is still sent
(as a call already on its way would be).
"""

from __future__ import annotations

import abc
import asyncio
from typing import Any, Generic, TypeVar

import anyio
import anyio.lowlevel

__all__ = ["GroupSender", "Queued"]


class Queued:
    """One caller's item: set ``value`` or ``exc`` when its batch was sent."""

    __slots__ = ("done", "lead", "value", "exc")

    def __init__(self) -> None:
        #: Set when its batch was sent; made only for a caller that waits (one that finds
        #: nothing out sends at once, and waits on nothing).
        self.done: anyio.Event | asyncio.Event | None = None
        #: Set instead of an outcome: this caller sends the next batch.
        self.lead = False
        self.value: Any = None
        self.exc: BaseException | None = None

    def outcome(self) -> Any:
        if self.exc is not None:
            raise self.exc
        return self.value


Q = TypeVar("Q", bound=Queued)


def _on_asyncio() -> bool:
    """Whether the caller runs on asyncio (else another anyio backend)."""
    try:
        return asyncio.current_task() is not None
    except RuntimeError:  # no asyncio loop runs here
        return False


class GroupSender(abc.ABC, Generic[Q]):
    """Sends queued items in batches, one batch out at a time (:meth:`_flush`)."""

    def __init__(self) -> None:
        self._queue: list[Q] = []
        self._sending = False
        #: asyncio's own event and zero sleep when running on asyncio (found on the first
        #: call): inside the shielded scope they do what anyio's do, without asking the
        #: kernel for the pid each time (asyncio's running-loop check, which anyio's
        #: backend lookup makes)
        self._native: bool | None = None

    @abc.abstractmethod
    async def _flush(self, batch: list[Q]) -> None:
        """Send ``batch``, setting each item's outcome (an error it raises reaches only the
        caller that sent the batch)."""

    async def _enqueue(self, item: Q) -> Any:
        """Queue ``item``; return its outcome once the batch holding it was sent."""
        self._queue.append(item)
        native = self._native
        if native is None:
            native = self._native = _on_asyncio()
        with anyio.CancelScope(shield=True):  # a queued item is sent: wait for its outcome
            if self._sending:
                done = item.done = asyncio.Event() if native else anyio.Event()
                await done.wait()
                if not item.lead:
                    return item.outcome()
            self._sending = True
            # one tick: let concurrent calls queue
            await (asyncio.sleep(0) if native else anyio.lowlevel.checkpoint())
            batch, self._queue = self._queue, []
            try:
                await self._flush(batch)
            finally:
                if self._queue:  # the next batch's first caller sends it
                    first = self._queue[0]
                    first.lead = True
                    if first.done is not None:  # queued while this batch was out: it waits
                        first.done.set()
                else:
                    self._sending = False
                for b in batch:
                    if b.done is not None:
                        b.done.set()
        return item.outcome()
