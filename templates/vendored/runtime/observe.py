"""Process-wide hooks for operators' counters that have no engine at hand: store failures
(``guard.store_error``) and store retries (the Redis client's reconnect retries, scripts
loaded again). Empty unless something listens (``ops.metrics.TaskMetrics``): then each
is one call per event, off the path of a request that succeeds.
"""

from __future__ import annotations

from collections.abc import Callable

#: called with the exception of every store failure the engine answers as unavailable
store_failed: list[Callable[[BaseException], None]] = []
#: called with what was retried (e.g. ``"reconnect"``, ``"script"``) on each store retry
store_retried: list[Callable[[str], None]] = []


def store_failure(exc: BaseException) -> None:
    for fn in store_failed:
        fn(exc)


def store_retry(what: str) -> None:
    for fn in store_retried:
        fn(what)
