"""The Redis client's retries, counted for operators (``observe.store_retried``): the
backoff is asked for a delay only before the client tries a command again."""

from __future__ import annotations

from redis.backoff import ExponentialBackoff

from ..observe import store_retried, store_retry


class CountingBackoff(ExponentialBackoff):
    """``ExponentialBackoff`` that reports each retry it is asked to delay."""

    def compute(self, failures: int) -> float:
        if store_retried:
            store_retry("reconnect")
        return super().compute(failures)
