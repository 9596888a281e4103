"""The ttls of running work, renewed before they run out.

With ``EngineConfig.keep_running_tasks`` (the default) a task does not expire while its work
runs here: each sweep renews the ttl of every run whose expiry is nearer than
``EngineConfig.renew_lead_s`` (a lookup that finds it past its expiry renews it on the
spot), by the ttl asked for but at least twice that lead, never past ``max_ttl_ms`` from
creation (there the work is stopped and the task expires, R-SEC-4). When the work of a task
ends after its original expiry, the outcome's write first sets the ttl to end ``ttl`` after
now: the task is kept for its ttl after its end (R-TTL-3). Every renewal is reported as the
task's actual ttl (R-TTL-2, X-TTL-3). A store without ``set_ttl`` keeps ttls as created.

Built from the store writer and the config; it sees a run's :class:`~.runs.RunTtl` only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import anyio
import anyio.abc

from ...errors import TaskError
from ...store import TaskRecord
from ..logs import logger
from .config import EngineConfig
from .runs import RunTtl
from .store_writer import StoreWriter

__all__ = ["Renewals"]

log = logger("runtime")


class Renewals:
    """The ttls of tasks whose work runs here, renewed before they run out."""

    def __init__(self, writer: StoreWriter, config: EngineConfig) -> None:
        self.writer = writer
        self.config = config
        #: False once the store said it cannot change a ttl (``NotImplementedError``)
        self.supported = True

    @property
    def on(self) -> bool:
        return self.supported and self.config.keep_running_tasks

    def _hard(self, ttl: RunTtl) -> float:
        """When the task expires at the latest: ``max_ttl_ms`` after its creation."""
        return ttl.created_at + self.config.max_ttl_ms / 1000.0

    def past_keeping(self, ttl: RunTtl, now: float) -> bool:
        """Whether a task whose work ended can no longer be kept: its ttl ended (renewals
        on: its maximum ttl from creation; off: its ttl)."""
        if self.on:
            return ttl.ttl_ms is not None and now >= self._hard(ttl)
        return ttl.expires_at is not None and ttl.expires_at <= now

    async def _set(self, task_id: str, ttl: RunTtl, target: float) -> TaskRecord | None:
        ms = math.ceil((target - ttl.created_at) * 1000)
        ttl_ms = max(0, min(ms, self.config.max_ttl_ms))  # never past the maximum
        guard = self.writer.guard
        try:
            rec = await guard.set_ttl(task_id, ttl_ms)
        except NotImplementedError:
            self.supported = False
            log.warning(
                "%s cannot renew a ttl: tasks expire under their work (keep_running_tasks)",
                type(guard.store).__name__,
            )
            return None
        if rec is not None:
            ttl.expires_at = rec.expires_at
            ttl.renewed = True
        return rec

    @staticmethod
    def _lock(ttl: RunTtl) -> anyio.Lock:
        """One ttl change of a run at a time, so the one made at its end comes last."""
        if ttl.lock is None:
            ttl.lock = anyio.Lock()
        return ttl.lock

    async def renew(self, task_id: str, ttl: RunTtl, now: float) -> TaskRecord | None:
        """Push the expiry ahead (see the module); the new record, or None when it cannot
        be renewed (unlimited, at its maximum, unknown, or its work was stopped: ended
        elsewhere). Raises ``TaskError``."""
        if not self.on or ttl.ttl_ms is None or ttl.expires_at is None or ttl.stopped:
            return None
        async with self._lock(ttl):
            if ttl.stopped or ttl.expires_at is None:
                return None
            lead = self.config.renew_lead_s
            target = min(self._hard(ttl), now + max(ttl.ttl_ms / 1000.0, 2 * lead))
            if target <= ttl.expires_at:
                return None
            return await self._set(task_id, ttl, target)

    async def before_outcome(self, task_id: str, ttl: RunTtl, now: float) -> None:
        """The work ended: a task whose work outlived its original expiry is kept ``ttl``
        from now (within its maximum). Raises ``TaskError``."""
        if not self.on or ttl.ttl_ms is None or ttl.expires_at is None:
            return
        if ttl.lock is None and not ttl.renewed:  # no renewal was ever started
            if now < ttl.created_at + ttl.ttl_ms / 1000.0:
                return  # ended in time: kept until createdAt + ttl, as asked (no store call)
        async with self._lock(ttl):
            if not ttl.renewed and now < ttl.created_at + ttl.ttl_ms / 1000.0:
                return
            end = max(now, ttl.created_at) + ttl.ttl_ms / 1000.0
            await self._set(task_id, ttl, min(self._hard(ttl), end))

    def urgent(self, ttl: RunTtl) -> bool:
        """Whether work just started here must be renewed at once, not at this engine's
        next sweep: on a shared store a ttl shorter than the lead, as another instance's
        sweep may come first and would expire the task under its work."""
        ms = ttl.ttl_ms
        return (
            self.on
            and ms is not None
            and ms / 1000.0 < self.config.renew_lead_s
            and self.writer.shared
        )

    async def renew_soon(self, task_id: str, ttl: RunTtl, busy: bool) -> None:
        """An urgent renewal (``urgent``), unless the work returned already."""
        if not busy:  # kept until createdAt + ttl, as asked
            return
        try:
            await self.renew(task_id, ttl, self.writer.clock())
        except TaskError:
            pass  # the store is unavailable: the next sweep tries again

    async def renew_due(self, ttls: Iterable[tuple[str, RunTtl]], now: float) -> None:
        """Every sweep: renew those of ``(task ID, ttl)`` whose expiry is nearer than the
        lead."""
        if not self.on:
            return
        lead = self.config.renew_lead_s
        due = [t for t in ttls if t[1].expires_at is not None and t[1].expires_at - now < lead]
        for task_id, ttl in due:
            try:
                await self.renew(task_id, ttl, now)
            except TaskError:
                return  # the store is unavailable: the next sweep tries again
