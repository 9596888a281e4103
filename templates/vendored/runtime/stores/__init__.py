"""The stores: ``InMemoryTaskStore``, ``SqliteTaskStore``, the Redis store
(``stores.redis.RedisTaskStore``, the ``redis`` extra), and ``store_from_url`` for a store
named by a URL (``memory:``, ``sqlite:PATH``, ``redis://...``). Each is a ``TaskStore`` of the
bindings; none imports the engine or the ``mcp`` SDK."""

from __future__ import annotations

from .memory import InMemoryTaskStore
from .sqlite import SqliteTaskStore
from .url import check_store, store_from_url

__all__ = ["InMemoryTaskStore", "SqliteTaskStore", "check_store", "store_from_url"]
