"""The executors' registry: per tool, where its task work runs.

- in this process (the default): the router's own work function, run by the engine's run
  supervisor;
- on Docket workers (a tool declared ``on_workers``: ``offload.py``, ``worker.py``): a
  :class:`~.executor.HandedWork` the engine stores through the executor's guard and hands
  over.

This is the only module of the runtime that imports an executor (the worker process's own
module aside): the engine knows the protocol (``executor.py``), the router asks this
registry, and a new executor is added here without touching either.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...errors import InternalError
from ...store import TaskStore
from ..engine.executor import HandedWork
from .offload import Offload, RemoteWork

__all__ = ["Executors"]


class Executors:
    """The executors of one server's tools; ``open`` them with the engine's store while it
    serves (``McpTasks``), ``close`` them after."""

    def __init__(self, on_workers: Mapping[str, int]) -> None:
        #: tools whose work runs on workers -> runs allowed (1 + retries); read at each call
        self.on_workers = on_workers
        self._workers: Offload | None = None

    async def open(self, store: TaskStore) -> None:
        """Start the executors the declared tools need (Docket: needs a ``RedisTaskStore``)."""
        if not self.on_workers:
            return
        workers = Offload(store)
        await workers.__aenter__()
        self._workers = workers

    async def close(self, *exc: Any) -> None:
        workers, self._workers = self._workers, None
        if workers is not None:
            await workers.__aexit__(*exc)

    def work(
        self,
        tool: str,
        call: Mapping[str, Any],
        *,
        core: bool,
        connection: Any = None,
        client_capabilities: dict[str, Any] | None = None,
    ) -> HandedWork | None:
        """The work of a ``tools/call`` task of ``tool`` when another executor runs it; None
        when it runs in this process."""
        attempts = self.on_workers.get(tool)
        if attempts is None:
            return None
        if self._workers is None:
            raise InternalError(detail="the hand-over to workers is not running")
        return RemoteWork(
            self._workers,
            call,
            core=core,
            attempts=attempts,
            connection=connection if core else None,
            client_capabilities=client_capabilities,
        )
