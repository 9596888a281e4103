"""How long a requestor waits between two polls of a task: the one rule of every poll loop,
a client's (:mod:`.client`) and a server's polling its client's task (:mod:`.serve.outbound`)."""

from __future__ import annotations

import random
from typing import Final

__all__ = ["MIN_POLL_MS", "POLL_JITTER", "poll_delay"]

#: the shortest sleep between two polls, whatever the server suggests
MIN_POLL_MS: Final = 10
#: the jitter added to the asked interval, as fractions of it
POLL_JITTER: Final = (0.02, 0.10)


def poll_delay(interval_ms: int | float | None, default_ms: int) -> float:
    """Seconds to sleep before the next poll: the asked interval (``default_ms`` when the
    server gave none), at least :data:`MIN_POLL_MS`, plus 2-10% of it."""
    asked = max(default_ms if interval_ms is None else interval_ms, MIN_POLL_MS)
    return asked * (1 + random.uniform(*POLL_JITTER)) / 1000
