"""A graceful stop: the work running in this engine is given ``shutdown_grace_s`` to finish
(its outcome stored as usual) before the engine cancels what is left.

A server stopped by SIGTERM (a deploy, ``docker stop``, systemd) thus keeps the tasks it was
running: on a durable store their results are there for the requestor after the restart.
``McpTasks`` runs it in its Streamable HTTP app's lifespan shutdown (uvicorn's SIGTERM); the
engine's own ``async with`` does not wait (a test's or a host's exit stays immediate)."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Protocol

import anyio

__all__ = ["drain"]


class _Running(Protocol):
    #: True until the work returned or raised
    busy: bool

    @property
    def changed(self) -> anyio.Event: ...


async def drain(active: Mapping[str, _Running], grace_s: float, log: logging.Logger) -> int:
    """Wait until no work in ``active`` (task id -> run) is busy, for at most ``grace_s``
    seconds; returns how many runs were still busy then (the caller stops them)."""

    def busy() -> list[_Running]:
        return [run for run in list(active.values()) if run.busy]

    running = busy()
    if not running or grace_s <= 0:
        return len(running)
    log.warning(
        "stopping: waiting up to %g s for %d running task(s) to finish", grace_s, len(running)
    )
    deadline = time.monotonic() + grace_s
    while running:
        # woken by the run's change, or every half second (an outcome the store did not
        # take yet is written after the work ended: ``busy`` is what is waited for)
        with anyio.move_on_after(min(deadline - time.monotonic(), 0.5)):
            await running[0].changed.wait()
        if time.monotonic() >= deadline:
            break
        running = busy()
    left = busy()
    if left:
        log.warning(
            "stopping: %d task(s) still running after %g s are stopped (they fail: the"
            " server stopped before they finished)",
            len(left),
            grace_s,
        )
    return len(left)
