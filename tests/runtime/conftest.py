"""Fixtures of the runtime tests: a redis-server of the session (``redis_server``,
``redis_url``) and one per test (``fresh_redis_server``), from ``testkit.redis_fixtures``;
the task engine on each store (``store_factory``, ``make_engine``, ``engine``) and its
settable ``clock``, from ``testkit.engine_kit`` (a module's own fixture of the same name
wins, as ``test_engine_neutral``'s ``engine``)."""

from __future__ import annotations

from testkit.engine_kit import clock, engine, make_engine, store_factory
from testkit.redis_fixtures import fresh_redis_server, redis_server, redis_url

__all__ = [
    "clock",
    "engine",
    "fresh_redis_server",
    "make_engine",
    "redis_server",
    "redis_url",
    "store_factory",
]
