"""A ``TaskStore`` named by a URL, the way a server's ``--store`` flag names one:

- ``memory:`` (or ``memory``): an ``InMemoryTaskStore``, this process only;
- ``sqlite:PATH``: a ``SqliteTaskStore`` on the file ``PATH`` (made when missing; its
  directory must exist);
- ``redis://HOST:PORT/DB[?namespace=NS&lease=SECONDS]`` (also ``rediss://``, ``unix://``):
  a ``RedisTaskStore`` shared by every instance on that Redis and namespace (needs the
  ``redis`` package).

:func:`store_from_url` raises ``ValueError`` with one line naming what is wrong and what
to write instead; it connects to nothing (a Redis store connects on first use), so
:func:`check_store` is the start-up probe: one read, ``StoreUnavailable`` when the store
cannot answer it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Final

import anyio

from ...errors import StoreUnavailable
from ...store import TaskStore
from ..parts import missing
from .memory import InMemoryTaskStore
from .sqlite import SqliteTaskStore

__all__ = ["SHARED_SCHEMES", "STORE_URLS", "check_store", "shared_store_url", "store_from_url"]

#: the URL forms, for messages and ``--help``
STORE_URLS: Final = "memory:, sqlite:PATH or redis://HOST:PORT/DB"
#: the schemes of the shared (Redis) store: the only one several processes share
SHARED_SCHEMES: Final = ("redis://", "rediss://", "unix://")


def shared_store_url(url: str) -> bool:
    """Whether ``url`` names a store that several processes share (Redis)."""
    return url.startswith(SHARED_SCHEMES)


def store_from_url(url: str) -> TaskStore:
    """The store ``url`` names (see the module's docstring); ``ValueError`` otherwise."""
    if url in ("memory", "memory:"):
        return InMemoryTaskStore()
    if url.startswith("sqlite:"):
        return _sqlite(url, url[len("sqlite:") :])
    if shared_store_url(url):
        if (text := missing("redis")) is not None:
            raise ValueError(f"{url}: a Redis store needs {text}")
        from .redis import RedisTaskStore

        try:
            return RedisTaskStore.from_url(url)
        except ValueError as exc:
            raise ValueError(
                f"{url}: {exc} (expected redis://HOST:PORT/DB[?namespace=NS&lease=SECONDS])"
            ) from None
    raise ValueError(f"{url!r} is not a store URL: expected {STORE_URLS}")


def _sqlite(url: str, path: str) -> TaskStore:
    if not path:
        raise ValueError(f"{url!r}: expected sqlite:PATH, e.g. sqlite:tasks.db")
    directory = Path(path).parent
    if not directory.is_dir():
        raise ValueError(f"{url}: directory {directory} does not exist (make it, or pick another)")
    try:
        return SqliteTaskStore(path)
    except sqlite3.Error as exc:
        raise ValueError(f"{url}: cannot open the database: {exc}") from None


async def check_store(store: TaskStore, timeout: float = 10) -> None:
    """One read of ``store``; ``StoreUnavailable`` when it fails or takes over ``timeout``
    seconds (an unreachable Redis, say)."""
    with anyio.move_on_after(timeout):
        await store.get("store-check")
        return
    raise StoreUnavailable(message=f"no answer within {timeout:g} s")
