"""A task group held open across ``__aenter__``/``__aexit__`` of an object that runs
background work (the engine, the Redis store, the hand-over to workers)."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.abc

__all__ = ["aclose_quietly", "close_group", "open_group"]


async def open_group() -> anyio.abc.TaskGroup:
    """A task group, entered: close it with :func:`close_group`."""
    tg = anyio.create_task_group()
    await tg.__aenter__()
    return tg


async def close_group(tg: anyio.abc.TaskGroup | None) -> None:
    """Cancel what ``tg`` runs and wait for it to end (None: nothing to close)."""
    if tg is not None:
        tg.cancel_scope.cancel()
        await tg.__aexit__(None, None, None)


async def aclose_quietly(resource: Any) -> None:
    """``await resource.aclose()``, shielded from cancellation, its error ignored (a
    connection being dropped after its failure)."""
    with anyio.CancelScope(shield=True):
        try:
            await resource.aclose()
        except Exception:
            pass
