"""Fixtures of the runtime tests: a redis-server of the session (``redis_server``,
``redis_url``) and one per test (``fresh_redis_server``), from ``testkit.redis_fixtures``."""

from __future__ import annotations

from testkit.redis_fixtures import fresh_redis_server, redis_server, redis_url

__all__ = ["fresh_redis_server", "redis_server", "redis_url"]
