"""Slow clients, bounded: uvicorn's HTTP protocols with the deadlines uvicorn lacks.

uvicorn closes a connection idle between requests (``timeout_keep_alive``) but waits
forever for a request's headers or body, and keeps a response a client never reads in the
transport's buffer until the client closes. :func:`guarded_protocol` subclasses uvicorn's
own protocol class (``httptools`` or ``h11``, whichever ``--http-stack`` picks) with

- ``header_timeout``: the whole request head must arrive within this many seconds of the
  connection opening, or of its first byte after a kept-alive response (slowloris);
- ``body_timeout``: while a request body is being read, at most this many seconds between
  two reads of it;
- ``send_timeout``: a response the client does not read (the transport's buffer full, its
  writing paused) for this many seconds is dropped with the connection, and its bytes with
  it: a per-connection bound on unsent response bytes held in time.

A connection past a deadline is closed (aborted when writes are stuck); closing counts in
``SlowClientStats`` and is logged at most once per :data:`LOG_EVERY_S` seconds with the
count since, never once per connection.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["LOG_EVERY_S", "Deadlines", "SlowClientStats", "ThrottledLog", "guarded_protocol"]

log = logging.getLogger(__name__)

#: the shortest time between two log lines about slow clients (or aborted bodies)
LOG_EVERY_S: Final = 60.0


class ThrottledLog:
    """A warning logged at most once per ``every`` seconds, with how many were held back."""

    def __init__(self, logger: logging.Logger, message: str, every: float = LOG_EVERY_S) -> None:
        self.logger = logger
        self.message = message
        self.every = every
        self._next = 0.0
        self._held = 0

    def __call__(self, what: str) -> None:
        now = time.monotonic()
        if now < self._next:
            self._held += 1
            return
        held, self._held = self._held, 0
        self._next = now + self.every
        more = f" ({held} more since the last report)" if held else ""
        self.logger.warning("%s: %s%s", self.message, what, more)


@dataclass
class SlowClientStats:
    """Connections closed for each deadline (in this process)."""

    header: int = 0
    body: int = 0
    send: int = 0


@dataclass(frozen=True)
class Deadlines:
    """The deadlines of one server's connections, their counts and their log line."""

    header_timeout: float
    body_timeout: float
    send_timeout: float
    stats: SlowClientStats
    report: ThrottledLog


#: the protocol class a deadline class is mixed into (uvicorn's; any to the type checker)
_Protocol: Any = object


class _WithDeadlines(_Protocol):  # type: ignore[misc]
    """The deadlines mixed into a uvicorn protocol class (see :func:`guarded_protocol`)."""

    deadlines: Deadlines

    def connection_made(self, transport: asyncio.Transport) -> None:
        super().connection_made(transport)
        self._read_timer: asyncio.TimerHandle | None = None
        self._send_timer: asyncio.TimerHandle | None = None
        self._watch_head()

    def _arm(self, seconds: float, fired: Any) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
        self._read_timer = self.loop.call_later(seconds, fired)

    def _disarm(self) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None

    def _head_pending(self) -> bool:
        cycle = self.cycle
        return cycle is None or bool(cycle.response_complete)

    def _body_pending(self) -> bool:
        cycle = self.cycle
        return cycle is not None and not cycle.response_complete and bool(cycle.more_body)

    def _watch_head(self) -> None:
        self._arm(self.deadlines.header_timeout, self._head_expired)
        self._head_armed = True

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.transport.is_closing():
            self._disarm()
        elif self._head_pending():
            # a head begun and not complete (the first, or one after a kept-alive response):
            # its deadline runs from its first bytes, never restarted by the next ones; a head
            # that arrives whole in one read (the common case) never sets a timer
            if not self._head_armed:
                self._watch_head()
        elif self._body_pending():
            self._head_armed = False
            self._arm(self.deadlines.body_timeout, self._body_expired)  # between two reads
        else:
            self._head_armed = False
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._head_armed = False  # uvicorn's keep-alive timer waits for the next request
        self._disarm()

    def _head_expired(self) -> None:
        self._read_timer = None
        if not self._head_pending() or self.transport.is_closing():
            return
        if self.cycle is not None and not self._head_armed:
            return  # kept alive after a response: uvicorn's keep-alive timer
        d = self.deadlines
        d.stats.header += 1
        d.report(f"request head not complete in {d.header_timeout:g} s")
        self.transport.close()

    def _body_expired(self) -> None:
        self._read_timer = None
        if self._body_pending() and not self.transport.is_closing():
            d = self.deadlines
            d.stats.body += 1
            d.report(f"request body stalled for {d.body_timeout:g} s")
            self.transport.close()

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._send_timer is None:
            self._send_timer = self.loop.call_later(self.deadlines.send_timeout, self._send_expired)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._send_timer is not None:
            self._send_timer.cancel()
            self._send_timer = None

    def _send_expired(self) -> None:
        self._send_timer = None
        d = self.deadlines
        d.stats.send += 1
        d.report(f"response not read for {d.send_timeout:g} s")
        self.transport.abort()  # drops the unsent bytes

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self._send_timer is not None:
            self._send_timer.cancel()
            self._send_timer = None
        super().connection_lost(exc)


def guarded_protocol(
    base: type[Any],
    *,
    header_timeout: float,
    body_timeout: float,
    send_timeout: float,
    stats: SlowClientStats | None = None,
) -> type[Any]:
    """``base`` (uvicorn's ``H11Protocol`` or ``HttpToolsProtocol``) with the deadlines of
    the module's docstring; a class for ``uvicorn.Config(http=...)``."""
    for name, value in (
        ("header_timeout", header_timeout),
        ("body_timeout", body_timeout),
        ("send_timeout", send_timeout),
    ):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise ValueError(f"{name} must be a positive number of seconds, not {value!r}")
    deadlines = Deadlines(
        header_timeout,
        body_timeout,
        send_timeout,
        stats if stats is not None else SlowClientStats(),
        ThrottledLog(log, "closed slow client connections"),
    )
    return type(f"Guarded{base.__name__}", (_WithDeadlines, base), {"deadlines": deadlines})
