"""``EngineConfig``: the engine's limits and defaults, checked when it is built.

Every limit has a safe default (R-SEC-3, R-SEC-4). A wrong type or an impossible value
raises ``TypeError``/``ValueError`` here, naming the field, rather than failing later
on every request.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...protocol import TTL_NULLABLE

#: fields that must be integers >= 1 (or >= 0 for those in _MAY_BE_ZERO)
_COUNTS = (
    "max_ttl_ms",
    "page_size",
    "max_active_per_requestor",
    "rate_limit_calls",
    "expired_tombstones_per_requestor",
    "tombstone_requestors",
    "max_tombstones",
    "max_result_bytes",
    "max_result_bytes_per_requestor",
)
#: tasks and bytes kept by all requestors together when not given (``EngineConfig``)
DEFAULT_MAX_TASKS_TOTAL = 100_000
DEFAULT_MAX_RESULT_BYTES_TOTAL = 1024 * 1024 * 1024
_MAY_BE_ZERO = frozenset({"max_ttl_ms", "expired_tombstones_per_requestor", "max_tombstones"})
#: fields that must be positive, finite numbers of seconds
_SECONDS = (
    "rate_limit_window_s",
    "sweep_interval_s",
    "watch_fallback_s",
    "input_claim_s",
    "outcome_retry_s",
    "outcome_retry_max_s",
    "renew_ahead_s",
    "progress_message_interval_s",
)


@dataclass
class EngineConfig:
    """Engine settings; every limit has a safe default (R-SEC-3, R-SEC-4)."""

    #: ttl of a task whose requestor asks none (None: unlimited, needs allow_unlimited_ttl)
    default_ttl_ms: int | None = 3_600_000
    #: the longest ttl granted; a larger request is clamped and the actual ttl reported
    max_ttl_ms: int = 86_400_000
    #: honour ``ttl: null`` (unlimited); refused when the schema's ``Task.ttl`` is not nullable
    allow_unlimited_ttl: bool = False
    poll_interval_ms: int | None = 500
    page_size: int = 50
    max_active_per_requestor: int = 100
    #: ``tasks/*`` calls and task creations per requestor per window (R-SEC-3)
    rate_limit_calls: int = 1000
    rate_limit_window_s: float = 10.0
    #: tasks kept per requestor (any status, until their ttl): at the cap, its oldest
    #: finished task is dropped to make room (as if its ttl had ended); None: ten times
    #: ``max_active_per_requestor`` (1,000 by default). Requestors without a token share
    #: theirs by client address (every session and anonymous request of one address: a
    #: client cannot multiply it by opening sessions); a token's subject has its own
    max_tasks_per_requestor: int | None = None
    #: the largest result (or error) one task may keep, in bytes of JSON; a larger one
    #: fails the task with ``ResultTooLarge`` instead of being kept
    max_result_bytes: int = 4 * 1024 * 1024
    #: bytes kept per requestor (shared by client address as ``max_tasks_per_requestor``):
    #: the result, error and statusMessage of each finished task, the arguments of each
    #: running one; past it, its oldest finished tasks are dropped
    max_result_bytes_per_requestor: int = 64 * 1024 * 1024
    #: tasks kept by every requestor together: at the cap, the oldest finished task of any
    #: requestor is dropped to make room. 100 requestors at their cap; a task's record
    #: without its bytes costs about 1.2 KiB (in memory), so ~120 MiB besides the bytes below.
    #: None: 100,000, or ``max_tasks_per_requestor`` where that is larger (raising a
    #: requestor's cap raises this one with it; a value given must be at least that cap)
    max_tasks_total: int | None = None
    #: bytes (as ``max_result_bytes_per_requestor`` counts them) kept by every requestor
    #: together: past it, the oldest finished tasks of any requestor are dropped. 16
    #: requestors at their cap: what an in-memory store may hold of results. None: 1 GiB, or
    #: ``max_result_bytes_per_requestor`` where that is larger
    max_result_bytes_total: int | None = None
    sweep_interval_s: float = 1.0
    #: signs tasks/list cursors (bytes, or a str used as UTF-8); None: a random key, or a
    #: shared store's own secret
    cursor_secret: bytes | str | None = None
    #: recently expired task IDs remembered per requestor to answer "Task has expired"
    expired_tombstones_per_requestor: int = 1024
    #: requestors whose tombstones are kept (least recently expired dropped first)
    tombstone_requestors: int = 10_000
    #: tombstones kept in all (about 140 bytes each; the oldest are dropped first): without
    #: it, many sessions expiring ttl-0 tasks could pin 10,000 x 1024 IDs (~1.4 GiB)
    max_tombstones: int = 100_000
    #: the shortest time between two ``statusMessage`` writes of a task's progress (the
    #: extension face shows progress there: X-NOTIF-7); the last report of a burst is
    #: written when its interval ends
    progress_message_interval_s: float = 0.5
    #: shared stores: longest wait for a change event before re-reading the store anyway
    #: (the bounded fallback poll when a message was missed)
    watch_fallback_s: float = 1.0
    #: shared stores: how long a tasks/result call holds an input request it delivers
    #: before another instance may deliver it (renewed while the call waits)
    input_claim_s: float = 30.0
    #: an outcome the store did not take (unreachable, locked) is kept and written again:
    #: first after this many seconds, then twice as long each time, up to
    #: ``outcome_retry_max_s``, until the store takes it or the task's ttl ends; the task
    #: stays ``working`` meanwhile and a ``tasks/result`` waiting here gets it once stored
    outcome_retry_s: float = 0.1
    #: the longest wait between two writes of a kept outcome
    outcome_retry_max_s: float = 5.0
    #: a task does not expire while its work runs in this engine: its ttl is renewed before
    #: it runs out (up to ``max_ttl_ms`` from creation, where the work is stopped), and a
    #: task whose work outlived its ttl is kept ``ttl`` after its end (the actual ttl is
    #: reported, R-TTL-2); False: the ttl counts from creation whatever the status (R-TTL-3)
    keep_running_tasks: bool = True
    #: how long before it would expire a running task's ttl is renewed (at least twice
    #: ``sweep_interval_s`` is used): more than the clock difference between instances
    renew_ahead_s: float = 10.0
    #: SIGTERM to a Streamable HTTP server (its app's lifespan shutdown, ``McpTasks``) lets
    #: the work running here finish for up to this many seconds before it is stopped (its
    #: task then fails: the server stopped before it finished); 0: stop at once. Leaving
    #: ``async with engine`` stops the work at once, as before
    shutdown_grace_s: float = 25.0

    def __post_init__(self) -> None:
        for name in _COUNTS:
            _check_int(name, getattr(self, name), 0 if name in _MAY_BE_ZERO else 1)
        for name in ("default_ttl_ms", "poll_interval_ms"):
            value = getattr(self, name)
            if value is not None:
                _check_int(name, value, 0)
        for name in _SECONDS:
            _check_seconds(name, getattr(self, name))
        _check_seconds("shutdown_grace_s", self.shutdown_grace_s, zero=True)
        for name in ("allow_unlimited_ttl", "keep_running_tasks"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"EngineConfig.{name} must be a bool")
        self._at_least("outcome_retry_max_s", "outcome_retry_s", "the longest wait is no shorter")
        self.cursor_secret = _check_secret(self.cursor_secret)
        if self.allow_unlimited_ttl and not TTL_NULLABLE:
            raise ValueError(
                "EngineConfig.allow_unlimited_ttl=True: this package's schema does not allow "
                "an unlimited ttl (Task.ttl is not nullable), so a task with ttl null would "
                "break tasks/get and tasks/list; leave allow_unlimited_ttl off"
            )
        if self.max_tasks_per_requestor is None:
            self.max_tasks_per_requestor = 10 * self.max_active_per_requestor
        _check_int("max_tasks_per_requestor", self.max_tasks_per_requestor, 1)
        self._at_least(
            "max_tasks_per_requestor",
            "max_active_per_requestor",
            "the tasks kept include the active ones",
        )
        if self.max_tasks_total is None:
            self.max_tasks_total = max(DEFAULT_MAX_TASKS_TOTAL, self.max_tasks_per_requestor)
        if self.max_result_bytes_total is None:
            self.max_result_bytes_total = max(
                DEFAULT_MAX_RESULT_BYTES_TOTAL, self.max_result_bytes_per_requestor
            )
        _check_int("max_tasks_total", self.max_tasks_total, 1)
        _check_int("max_result_bytes_total", self.max_result_bytes_total, 1)
        self._at_least(
            "max_tasks_total", "max_tasks_per_requestor", "one requestor's tasks must fit"
        )
        self._at_least(
            "max_result_bytes_total",
            "max_result_bytes_per_requestor",
            "one requestor's results must fit",
        )
        self._at_least("max_result_bytes_per_requestor", "max_result_bytes", "one result must fit")
        if self.default_ttl_ms is None and not self.allow_unlimited_ttl:
            self.default_ttl_ms = self.max_ttl_ms
        if self.default_ttl_ms is not None:
            self.default_ttl_ms = min(self.default_ttl_ms, self.max_ttl_ms)

    def _at_least(self, name: str, floor: str, why: str) -> None:
        """``ValueError`` naming both fields, their values and ``why`` when field ``name`` is
        below field ``floor``."""
        value, least = getattr(self, name), getattr(self, floor)
        if value < least:
            raise ValueError(f"EngineConfig.{name} ({value}) must be >= {floor} ({least}): {why}")

    @property
    def renew_lead_s(self) -> float:
        """How long before its expiry a running task's ttl is renewed: ``renew_ahead_s``,
        at least two sweeps (a renewal must come before any instance's sweep would expire it)."""
        return max(self.renew_ahead_s, 2 * self.sweep_interval_s)

    def retry_delay_s(self, attempt: int) -> float:
        """The wait before write ``attempt + 1`` of a kept outcome (``attempt`` >= 1)."""
        return min(self.outcome_retry_max_s, self.outcome_retry_s * 2.0 ** min(attempt - 1, 60))

    @property
    def secret_bytes(self) -> bytes | None:
        """``cursor_secret`` as bytes (a str is encoded as UTF-8 at construction)."""
        secret = self.cursor_secret
        return secret.encode() if isinstance(secret, str) else secret


def _check_int(name: str, value: object, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"EngineConfig.{name} must be an int, not {type(value).__name__}")
    if value < least:
        raise ValueError(f"EngineConfig.{name} must be >= {least}, not {value}")


def _check_seconds(name: str, value: object, *, zero: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"EngineConfig.{name} must be a number, not {type(value).__name__}")
    if not (math.isfinite(value) and (value > 0 or (zero and value == 0))):
        what = "a number of seconds >= 0" if zero else "a positive number of seconds"
        raise ValueError(f"EngineConfig.{name} must be {what}, not {value}")


def _check_secret(value: object) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = value.encode("utf-8")
    if not isinstance(value, (bytes, bytearray)):
        raise TypeError(
            f"EngineConfig.cursor_secret must be bytes or str, not {type(value).__name__}"
        )
    if not value:
        raise ValueError("EngineConfig.cursor_secret must not be empty")
    return bytes(value)
