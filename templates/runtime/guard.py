"""``StoreGuard``: the one place where store failures become answers.

The engine calls its store only through a guard. A ``TaskError`` a store raises (e.g.
``StoreUnavailable`` naming what is unreachable) passes through; any other exception
becomes a plain ``StoreUnavailable`` ("Task store unavailable"); what failed is logged.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Any

from ..errors import StoreUnavailable, TaskError
from ..protocol import TaskStatus
from ..store import SharedTaskStore, TaskRecord, TaskStore, TaskWatch

log = logging.getLogger(__name__.rsplit(".", 2)[0] + ".runtime")


def store_error(exc: Exception) -> TaskError:
    """A store failure as the error to answer; what failed goes to the server log only."""
    if isinstance(exc, TaskError):
        return exc
    log.warning("task store failed: %s: %s", type(exc).__name__, exc)
    return StoreUnavailable()


class StoreGuard:
    """A ``TaskStore``'s methods, each raising only ``TaskError``."""

    __slots__ = ("store",)

    def __init__(self, store: TaskStore) -> None:
        self.store = store

    async def create(self, record: TaskRecord) -> None:
        try:
            await self.store.create(record)
        except Exception as exc:
            raise store_error(exc) from exc

    async def get(self, task_id: str) -> TaskRecord | None:
        try:
            return await self.store.get(task_id)
        except Exception as exc:
            raise store_error(exc) from exc

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
        try:
            return await self.store.transition(
                task_id,
                status,
                now=now,
                expected=expected,
                status_message=status_message,
                result=result,
                error=error,
            )
        except Exception as exc:
            raise store_error(exc) from exc

    async def list_tasks(
        self, requestor: str, *, after: tuple[float, str] | None, limit: int
    ) -> list[TaskRecord]:
        try:
            return await self.store.list_tasks(requestor, after=after, limit=limit)
        except Exception as exc:
            raise store_error(exc) from exc

    async def delete(self, task_id: str) -> bool:
        try:
            return await self.store.delete(task_id)
        except Exception as exc:
            raise store_error(exc) from exc

    async def pop_expired(self, now: float, limit: int) -> list[TaskRecord]:
        try:
            return await self.store.pop_expired(now, limit)
        except Exception as exc:
            raise store_error(exc) from exc

    async def count_active(self, requestor: str) -> int:
        try:
            return await self.store.count_active(requestor)
        except Exception as exc:
            raise store_error(exc) from exc

    async def recover(self, now: float, message: str) -> list[TaskRecord]:
        try:
            return await self.store.recover(now, message)
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
        try:
            return await self.shared.shared_secret()
        except Exception as exc:
            raise store_error(exc) from exc

    async def put_input(self, task_id: str, requestor: str, item: dict[str, Any]) -> bool:
        try:
            return await self.shared.put_input(task_id, requestor, item)
        except Exception as exc:
            raise store_error(exc) from exc

    async def claim_inputs(
        self, task_id: str, requestor: str, claimer: str, lease_s: float
    ) -> list[dict[str, Any]]:
        try:
            return await self.shared.claim_inputs(task_id, requestor, claimer, lease_s)
        except Exception as exc:
            raise store_error(exc) from exc

    async def release_input(
        self, task_id: str, requestor: str, input_id: str, claimer: str
    ) -> None:
        try:
            await self.shared.release_input(task_id, requestor, input_id, claimer)
        except Exception as exc:
            raise store_error(exc) from exc

    async def answer_input(
        self, task_id: str, requestor: str, input_id: str, answer: dict[str, Any]
    ) -> bool:
        try:
            return await self.shared.answer_input(task_id, requestor, input_id, answer)
        except Exception as exc:
            raise store_error(exc) from exc

    async def take_answer(
        self, task_id: str, requestor: str, input_id: str
    ) -> dict[str, Any] | None:
        try:
            return await self.shared.take_answer(task_id, requestor, input_id)
        except Exception as exc:
            raise store_error(exc) from exc

    async def withdraw_input(self, task_id: str, requestor: str, input_id: str) -> None:
        try:
            await self.shared.withdraw_input(task_id, requestor, input_id)
        except Exception as exc:
            raise store_error(exc) from exc
