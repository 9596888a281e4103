"""``StoreGuard``: the one place where store failures become answers.

The engine calls its store only through a guard. A ``TaskError`` a store raises (e.g.
``StoreUnavailable`` naming what is unreachable) passes through; any other exception
becomes a plain ``StoreUnavailable`` ("Task store unavailable"); what failed is logged.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable
from typing import Any, TypeVar

from ...errors import StoreUnavailable, TaskError
from ...protocol import TaskStatus
from ...store import SharedTaskStore, TaskRecord, TaskStore, TaskWatch
from ..logs import logger
from ..observe import store_failed, store_failure

log = logger("runtime")

T = TypeVar("T")


def store_error(exc: Exception) -> TaskError:
    """A store failure as the error to answer; what failed goes to the server log only."""
    if store_failed:
        store_failure(exc)
    if isinstance(exc, TaskError):
        return exc
    log.warning("task store failed: %s: %s", type(exc).__name__, exc)
    return StoreUnavailable()


async def guarded(call: Awaitable[T]) -> T:
    """Await one store call; any failure raised as ``store_error`` says (a ``TaskError``
    as it is: ``UnstorableValue`` too, so the engine can tell a bad value from an outage)."""
    try:
        return await call
    except Exception as exc:
        raise store_error(exc) from exc


@functools.cache
def _takes_face(cls: type[TaskStore]) -> bool:
    params = inspect.signature(cls.list_tasks).parameters
    return "face" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def takes_face(store: TaskStore) -> bool:
    """Whether ``store.list_tasks`` filters by ``face`` (stores written before it did not)."""
    return _takes_face(type(store))


class StoreGuard:
    """A ``TaskStore``'s methods, each raising only ``TaskError``."""

    __slots__ = ("store",)

    def __init__(self, store: TaskStore) -> None:
        self.store = store

    async def create_limited(self, record: TaskRecord, max_active: int) -> bool:
        return await guarded(self.store.create_limited(record, max_active))

    async def get(self, task_id: str) -> TaskRecord | None:
        # Spelled out (not through ``guarded``): the hot path of every task lookup.
        try:
            return await self.store.get(task_id)
        except Exception as exc:
            raise store_error(exc) from exc

    async def get_own(self, task_id: str, requestor: str) -> TaskRecord | None:
        """``TaskStore.get_own``: the lookups of a requestor's own task."""
        try:
            return await self.store.get_own(task_id, requestor)
        except Exception as exc:
            raise store_error(exc) from exc

    async def transition(
        self, task_id: str, status: TaskStatus, **change: Any
    ) -> TaskRecord | None:
        """``TaskStore.transition`` (keyword arguments passed on as they are)."""
        # Spelled out (not through ``guarded``): every status change.
        try:
            return await self.store.transition(task_id, status, **change)
        except Exception as exc:
            raise store_error(exc) from exc

    async def list_tasks(
        self,
        requestor: str,
        *,
        after: tuple[float, str] | None,
        limit: int,
        face: str | None = None,
    ) -> list[TaskRecord]:
        """``TaskStore.list_tasks``; a store written before listings took a ``face`` lists
        every face (the engine filters what it reads)."""
        if face is None or not takes_face(self.store):
            return await guarded(self.store.list_tasks(requestor, after=after, limit=limit))
        return await guarded(self.store.list_tasks(requestor, after=after, limit=limit, face=face))

    async def delete(self, task_id: str) -> bool:
        return await guarded(self.store.delete(task_id))

    async def pop_expired(self, now: float, limit: int) -> list[TaskRecord]:
        return await guarded(self.store.pop_expired(now, limit))

    async def count_active(self, requestor: str) -> int:
        return await guarded(self.store.count_active(requestor))

    async def recover(self, now: float, message: str) -> list[TaskRecord]:
        return await guarded(self.store.recover(now, message))

    async def set_ttl(self, task_id: str, ttl_ms: int) -> TaskRecord | None:
        """``TaskStore.set_ttl``; ``NotImplementedError`` (a store that cannot) as it is."""
        try:
            return await self.store.set_ttl(task_id, ttl_ms)
        except NotImplementedError:
            raise
        except Exception as exc:
            raise store_error(exc) from exc


class SharedStoreGuard(StoreGuard):
    """A ``SharedTaskStore``'s methods too, each raising only ``TaskError``."""

    __slots__ = ("shared",)

    def __init__(self, store: SharedTaskStore) -> None:
        super().__init__(store)
        self.shared = store

    def watch(self, task_id: str) -> TaskWatch:
        return self.shared.watch(task_id)

    async def shared_secret(self) -> bytes | None:
        return await guarded(self.shared.shared_secret())

    async def put_input(self, task_id: str, requestor: str, item: dict[str, Any]) -> bool:
        return await guarded(self.shared.put_input(task_id, requestor, item))

    async def pending_inputs(self, task_id: str, requestor: str) -> list[dict[str, Any]]:
        return await guarded(self.shared.pending_inputs(task_id, requestor))

    async def claim_inputs(
        self, task_id: str, requestor: str, claimer: str, lease_s: float
    ) -> list[dict[str, Any]]:
        return await guarded(self.shared.claim_inputs(task_id, requestor, claimer, lease_s))

    async def release_input(
        self, task_id: str, requestor: str, input_id: str, claimer: str
    ) -> None:
        await guarded(self.shared.release_input(task_id, requestor, input_id, claimer))

    async def answer_input(
        self, task_id: str, requestor: str, input_id: str, answer: dict[str, Any]
    ) -> bool:
        return await guarded(self.shared.answer_input(task_id, requestor, input_id, answer))

    async def take_answer(
        self, task_id: str, requestor: str, input_id: str
    ) -> dict[str, Any] | None:
        return await guarded(self.shared.take_answer(task_id, requestor, input_id))

    async def withdraw_input(self, task_id: str, requestor: str, input_id: str) -> None:
        await guarded(self.shared.withdraw_input(task_id, requestor, input_id))

    async def offer_input(
        self, task_id: str, requestor: str, item: dict[str, Any], **kw: Any
    ) -> TaskRecord | None:
        return await guarded(self.shared.offer_input(task_id, requestor, item, **kw))

    async def answer_inputs(
        self, task_id: str, requestor: str, answers: dict[str, dict[str, Any]], *, now: float
    ) -> tuple[set[str], TaskRecord | None]:
        return await guarded(self.shared.answer_inputs(task_id, requestor, answers, now=now))

    async def resume(self, task_id: str, requestor: str, *, now: float) -> TaskRecord | None:
        return await guarded(self.shared.resume(task_id, requestor, now=now))
