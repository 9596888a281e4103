"""The store as the engine's parts write it: the coordination chosen for the store (and the
one ``StoreGuard`` every store call goes through) with the engine's clock.

The engine sets ``coordination`` when its store is set; the parts read it at each call, so
they never hold the engine. This module imports no other part of the engine.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...protocol import TaskStatus
from ...store import TaskRecord
from .coordination import Coordination
from .guard import StoreGuard

__all__ = ["StoreWriter"]


class StoreWriter:
    """The guarded store, its coordination and the clock (see the module)."""

    __slots__ = ("clock", "coordination")

    #: set by the engine with its store, before any call
    coordination: Coordination

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock

    @property
    def guard(self) -> StoreGuard:
        return self.coordination.guard

    @property
    def shared(self) -> bool:
        """Whether other instances run the store's tasks too."""
        return self.coordination.guard.store.shared

    async def transition(self, task_id: str, status: TaskStatus, **kw: Any) -> TaskRecord | None:
        return await self.coordination.guard.transition(task_id, status, now=self.clock(), **kw)
