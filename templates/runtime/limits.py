"""The engine's limits (R-SEC-3, R-SEC-4): the rate limit, the count of active tasks per
requestor (with reservations for creations in flight), and the ttl policy (R-TTL-2)."""

from __future__ import annotations

import enum
import time

from ..errors import ConcurrencyLimitExceeded, RateLimitExceeded
from .audit import audit
from .config import EngineConfig


class RateLimiter:
    """R-SEC-3: a fixed-window counter of ``tasks/*`` calls per requestor."""

    __slots__ = ("_counts", "calls", "window_s")

    def __init__(self, calls: int, window_s: float) -> None:
        self.calls = calls
        self.window_s = window_s
        self._counts: dict[str, tuple[float, int]] = {}

    def check(self, requestor: str) -> None:
        """Count one call; raise ``RateLimitExceeded`` past the limit."""
        now = time.monotonic()
        start, count = self._counts.get(requestor, (now, 0))
        if now - start >= self.window_s:
            start, count = now, 0
        count += 1
        self._counts[requestor] = (start, count)
        if count > self.calls:
            audit("rate_limited", requestor, None)
            raise RateLimitExceeded(self.calls, self.window_s)

    def prune(self) -> None:
        """Forget finished windows once many requestors were seen (called by the sweeper)."""
        if len(self._counts) > 1024:
            now = time.monotonic()
            window = self.window_s
            self._counts = {k: v for k, v in self._counts.items() if now - v[0] < window}


class ActiveLimit:
    """R-SEC-4: at most ``limit`` non-terminal tasks per requestor.

    The store counts the active tasks as it creates one (``TaskStore.create_limited``).
    When its count and write are two steps (the default), creations in flight hold a
    reservation (``acquire`` ... ``release`` in a ``finally``) and the store gets the
    ``room`` left by the others, so concurrent creations of one requestor cannot overshoot
    the limit."""

    __slots__ = ("_reserved", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._reserved: dict[str, int] = {}

    def acquire(self, requestor: str) -> None:
        """Hold one slot for a creation in flight."""
        self._reserved[requestor] = self._reserved.get(requestor, 0) + 1

    def room(self, requestor: str) -> int:
        """How many active tasks the store may hold for one more to be created: the limit
        less the other creations in flight."""
        return self.limit - self._reserved[requestor] + 1

    def refuse(self, requestor: str) -> None:
        """Raise ``ConcurrencyLimitExceeded`` (the store had no room)."""
        audit("create_rejected", requestor, None, reason="concurrency_limit")
        raise ConcurrencyLimitExceeded(self.limit)

    def release(self, requestor: str) -> None:
        """The creation ended (created or refused)."""
        left = self._reserved[requestor] - 1
        if left:
            self._reserved[requestor] = left
        else:
            del self._reserved[requestor]


class Default(enum.Enum):
    """The type of ``DEFAULT``: no ttl asked for."""

    DEFAULT = "default"


#: A ttl nobody asked for: the server's default applies.
DEFAULT = Default.DEFAULT


def ttl_policy(config: EngineConfig, requested: int | None | Default) -> int | None:
    """The actual ttl (R-TTL-2) of a non-negative ``requested`` one (faces read and check
    it): the default when ``DEFAULT``, clamped to the maximum; ``None`` (unlimited) only
    with ``allow_unlimited_ttl``, else the maximum."""
    if requested is DEFAULT:
        return config.default_ttl_ms
    if requested is None:
        return None if config.allow_unlimited_ttl else config.max_ttl_ms
    # Clamped before any arithmetic: 10**15 never reaches a timer or a date (R-SEC-4).
    return min(requested, config.max_ttl_ms)
