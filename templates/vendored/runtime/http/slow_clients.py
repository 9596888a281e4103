"""Slow and numerous clients, bounded: uvicorn's HTTP protocols with the deadlines and the
connection caps uvicorn lacks.

uvicorn closes a connection idle between requests (``timeout_keep_alive``) but waits
forever for a request's headers or body, keeps a response a client never reads in the
transport's buffer until the client closes, and accepts connections until the process runs
out of file descriptors (then nobody new is served). :func:`guarded_protocol` subclasses
uvicorn's own protocol class (``httptools`` or ``h11``, whichever ``--http-stack`` picks)
with

- ``header_timeout``: the whole request head must arrive within this many seconds of the
  connection opening, or of its first byte after a kept-alive response (slowloris);
- ``request_timeout``: the whole request, head and body, within this many seconds of the
  same start (a body sent slowly but steadily, R.U.D.Y.);
- ``min_body_rate`` ``(BYTES, SECONDS)``: while a body is being read, at least BYTES of it
  in every SECONDS (each window judged at its end, so the first SECONDS are a grace; a
  window in which the server itself paused reading, its buffer full, is not judged);
- ``body_timeout``: while a request body is being read, at most this many seconds between
  two reads of it;
- ``send_timeout``: a response the client does not read (the transport's buffer full, its
  writing paused) for this many seconds is dropped with the connection, and its bytes with
  it: a per-connection bound on unsent response bytes held in time;
- ``caps`` (:class:`ConnectionCaps`): open connections in all and per client address (the
  socket's peer, never a header), counted in one object that every listener of the process
  shares; a connection over a cap is answered at once with a bare HTTP 503 (in all) or 429
  (its address) and closed, so the descriptors below the process's limit keep serving others;
- ``max_head_bytes`` and ``max_headers``: a request head must end within this many bytes
  and hold at most this many header fields, or the connection is answered HTTP 431 and
  closed before anything reads the head (``request_heads.py``, on both stacks alike).

A connection past a deadline is closed (aborted when writes are stuck); closing and refusing
count in ``SlowClientStats`` and are logged at most once per :data:`LOG_EVERY_S` seconds for
each kind (head, request, rate, body, send; a head too large; over the cap of an address,
over the cap in all) with the count since, never once per connection. The per-request warnings an attacker can
cause in uvicorn (a request that does not parse, an upgrade not served) and in the ``mcp``
SDK's transport security (a bad ``Host`` or ``Origin``, logged when an abandoned body
reaches it) are throttled the same way (:func:`throttle_attack_logs`).

The guarded listeners serve no WebSocket (``uvicorn.Config(ws="none")``): an upgraded
connection would leave the protocol that counts and times it.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from .request_heads import DEFAULT_MAX_HEAD_BYTES, DEFAULT_MAX_HEADERS, head_limits

__all__ = [
    "DEFAULT_MAX_HEADERS",
    "DEFAULT_MAX_HEAD_BYTES",
    "DEFAULT_MIN_BODY_RATE",
    "DEFAULT_PER_ADDRESS",
    "DEFAULT_REQUEST_TIMEOUT",
    "LOG_EVERY_S",
    "ConnectionCaps",
    "Deadlines",
    "SlowClientStats",
    "ThrottledFilter",
    "ThrottledLog",
    "default_max_connections",
    "descriptor_limit",
    "guarded_protocol",
    "throttle_attack_logs",
    "trusted_addresses",
]

log = logging.getLogger(__name__)

#: the shortest time between two log lines about slow clients (or aborted bodies)
LOG_EVERY_S: Final = 60.0
#: seconds for a whole request, head and body
DEFAULT_REQUEST_TIMEOUT: Final = 60.0
#: at least this many bytes of a body in every window of this many seconds (1 KiB/s)
DEFAULT_MIN_BODY_RATE: Final = (10240, 10.0)
#: open connections of one client address, at most (and at most half of those in all)
DEFAULT_PER_ADDRESS: Final = 256
#: the descriptor limit assumed where the process cannot read its own (no ``resource``)
_UNKNOWN_FD_LIMIT: Final = 1024


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


class ThrottledFilter(logging.Filter):
    """A logger's warnings let through at most once per ``every`` seconds for each kind of
    message (its text up to the first ``:``), the next one let through saying how many were
    held back; errors and lower levels pass untouched. At most ``kinds`` kinds are told
    apart (the rest share one), so messages that vary cannot grow it without bound."""

    def __init__(self, every: float = LOG_EVERY_S, kinds: int = 64) -> None:
        super().__init__()
        self.every = every
        self.kinds = kinds
        self._next: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.WARNING:
            return True
        kind = str(record.msg).split(":", 1)[0]
        if kind not in self._next and len(self._next) >= self.kinds:
            kind = ""
        now = time.monotonic()
        if now < self._next.get(kind, 0.0):
            self._held[kind] = self._held.get(kind, 0) + 1
            return False
        self._next[kind] = now + self.every
        held = self._held.pop(kind, 0)
        if held:
            record.msg = f"{record.getMessage()} ({held} more since the last report)"
            record.args = None
        return True


#: the loggers whose warnings a client can cause once per request (their throttle)
_ATTACKABLE_LOGGERS: Final = ("uvicorn.error", "mcp.server.transport_security")


def throttle_attack_logs(every: float = LOG_EVERY_S) -> None:
    """A :class:`ThrottledFilter` on each logger a client can make warn once per request:
    uvicorn's (a request that does not parse, an upgrade not served) and the ``mcp`` SDK's
    transport security (a bad ``Host`` or ``Origin`` header). Idempotent."""
    for name in _ATTACKABLE_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, ThrottledFilter) for f in logger.filters):
            logger.addFilter(ThrottledFilter(every))


def descriptor_limit() -> int:
    """The process's soft limit on open file descriptors (``RLIMIT_NOFILE``), read now; a
    large stand-in where it is unlimited, 1,024 where it cannot be read."""
    try:
        import resource
    except ImportError:  # not on Unix
        return _UNKNOWN_FD_LIMIT
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft < 0:
        return 1 << 20
    return int(soft)


def default_max_connections(fd_limit: int | None = None) -> int:
    """Open connections in all by default: the descriptor limit (``fd_limit``, else
    :func:`descriptor_limit`) less a reserve for everything else the process opens (the
    store, logs, listening sockets, the event loop's own): an eighth of the limit, at least
    64 and at most half of it."""
    limit = descriptor_limit() if fd_limit is None else fd_limit
    reserve = min(max(64, limit // 8), limit // 2)
    return max(1, limit - reserve)


def trusted_addresses(spec: str) -> Callable[[str], bool]:
    """Whether an address is among ``spec``'s: comma-separated IP addresses and networks
    (``10.0.0.5,192.168.0.0/16,::1``), or ``*`` for any (``ValueError``: what is wrong)."""
    items = [item.strip() for item in spec.split(",") if item.strip()]
    if not items:
        raise ValueError("expected IP addresses or networks, comma-separated, or *")
    if "*" in items:
        return lambda address: True
    networks = []
    for item in items:
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ValueError(f"not an IP address or network: {item!r}") from None

    def trusted(address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in net for net in networks)

    return trusted


@dataclass
class ConnectionCaps:
    """Open connections of every guarded listener of one process (one event loop), capped
    in all (``total``) and per client address (``per_address``: the socket's peer address).
    Addresses for which ``exempt`` holds (trusted proxies, whose connections carry many
    clients) count in all only. Share one instance between the listeners."""

    total: int
    per_address: int
    exempt: Callable[[str], bool] | None = None
    open: int = 0
    _by_address: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("total", "per_address"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive number of connections, not {value!r}")

    def admit(self, address: str) -> int | None:
        """Count a new connection from ``address``: ``None`` when admitted, else the HTTP
        status of its refusal (429: its address is at its cap; 503: the cap in all)."""
        if self.open >= self.total:
            return 503
        counted = self.exempt is None or not self.exempt(address)
        if counted:
            held = self._by_address.get(address, 0)
            if held >= self.per_address:
                return 429
            self._by_address[address] = held + 1
        self.open += 1
        return None

    def release(self, address: str) -> None:
        """An admitted connection from ``address`` closed."""
        self.open -= 1
        held = self._by_address.get(address)
        if held is None:
            return  # an exempt address
        if held > 1:
            self._by_address[address] = held - 1
        else:
            del self._by_address[address]

    def held_by(self, address: str) -> int:
        """Open connections counted for ``address``."""
        return self._by_address.get(address, 0)


@dataclass
class SlowClientStats:
    """Connections closed for each deadline, and refused for each cap (in this process)."""

    header: int = 0
    request: int = 0
    rate: int = 0
    body: int = 0
    send: int = 0
    #: request heads refused (HTTP 431): over ``max_head_bytes`` or ``max_headers``
    head_size: int = 0
    refused_address: int = 0
    refused_total: int = 0


#: the log line of each kind of closed or refused connection (``Deadlines.report``)
_REPORTS: Final = {
    "refused_address": "refused connections",
    "refused_total": "refused connections",
    "head_size": "refused request heads",
}


@dataclass(frozen=True)
class Deadlines:
    """The deadlines and caps of one process's guarded connections, their counts and their
    log lines (one throttled line per kind)."""

    header_timeout: float
    body_timeout: float
    send_timeout: float
    stats: SlowClientStats
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    #: (BYTES, SECONDS) a body must reach in every window; ``None``: no minimum rate
    min_body_rate: tuple[int, float] | None = DEFAULT_MIN_BODY_RATE
    caps: ConnectionCaps | None = None
    max_head_bytes: int = DEFAULT_MAX_HEAD_BYTES
    max_headers: int = DEFAULT_MAX_HEADERS
    _reports: dict[str, ThrottledLog] = field(default_factory=dict, compare=False)

    def report(self, kind: str, what: str) -> None:
        """Count ``kind`` in :attr:`stats` and log ``what``, at most once a period per kind."""
        setattr(self.stats, kind, getattr(self.stats, kind) + 1)
        reporter = self._reports.get(kind)
        if reporter is None:
            message = _REPORTS.get(kind, "closed slow client connections")
            reporter = self._reports[kind] = ThrottledLog(log, message)
        reporter(what)


#: the whole answer to a connection over a cap: nothing else is read from it
_REFUSALS: Final = {
    status: (
        f"HTTP/1.1 {status} {reason}\r\ncontent-length: 0\r\nconnection: close\r\n"
        "retry-after: 1\r\n\r\n"
    ).encode()
    for status, reason in ((429, "Too Many Requests"), (503, "Service Unavailable"))
}

#: the protocol class a deadline class is mixed into (uvicorn's; any to the type checker)
_Protocol: Any = object


class _WithDeadlines(_Protocol):  # type: ignore[misc]
    """The deadlines mixed into a uvicorn protocol class (see :func:`guarded_protocol`)."""

    deadlines: Deadlines

    def connection_made(self, transport: asyncio.Transport) -> None:
        super().connection_made(transport)
        self._read_timer: asyncio.TimerHandle | None = None
        self._send_timer: asyncio.TimerHandle | None = None
        self._request_timer: asyncio.TimerHandle | None = None
        self._rate_timer: asyncio.TimerHandle | None = None
        self._window_bytes = 0
        self._window_paused = False
        self._address = str(self.client[0]) if self.client else ""
        d, caps = self.deadlines, self.deadlines.caps
        refused = caps.admit(self._address) if caps is not None else None
        self._admitted = refused is None
        if caps is not None and refused is not None:
            if refused == 429:
                d.report("refused_address", f"over {caps.per_address} per client address")
            else:
                d.report("refused_total", f"over {caps.total} in all")
            transport.write(_REFUSALS[refused])
            transport.close()
            return
        self._watch_head()

    def _arm(self, seconds: float, fired: Any) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
        self._read_timer = self.loop.call_later(seconds, fired)

    def _disarm(self) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None

    def _disarm_request(self) -> None:
        """The request is in (or the connection gone): no whole-request or rate deadline."""
        for name in ("_request_timer", "_rate_timer"):
            timer = getattr(self, name)
            if timer is not None:
                timer.cancel()
                setattr(self, name, None)

    def _head_pending(self) -> bool:
        cycle = self.cycle
        return cycle is None or bool(cycle.response_complete)

    def _body_pending(self) -> bool:
        cycle = self.cycle
        return cycle is not None and not cycle.response_complete and bool(cycle.more_body)

    def _watch_head(self) -> None:
        """A request begins: its head's deadline and its whole deadline run from now."""
        self._arm(self.deadlines.header_timeout, self._head_expired)
        self._head_armed = True
        self._disarm_request()
        self._request_timer = self.loop.call_later(
            self.deadlines.request_timeout, self._request_expired
        )

    def _watch_rate(self) -> None:
        self._window_bytes = 0
        self._window_paused = bool(self.flow.read_paused)
        rate = self.deadlines.min_body_rate
        if rate is not None:
            self._rate_timer = self.loop.call_later(rate[1], self._rate_judged)

    def data_received(self, data: bytes) -> None:
        if not self._admitted:
            return  # refused: answered and closing
        super().data_received(data)
        if self.transport.is_closing():
            self._disarm()
            self._disarm_request()
        elif self._head_pending():
            # a head begun and not complete (the first, or one after a kept-alive response):
            # its deadline runs from its first bytes, never restarted by the next ones; a head
            # that arrives whole in one read (the common case) never sets a timer
            if not self._head_armed:
                self._watch_head()
        elif self._body_pending():
            self._head_armed = False
            self._arm(self.deadlines.body_timeout, self._body_expired)  # between two reads
            if self._rate_timer is None:
                self._watch_rate()  # the body's first bytes: its first window
            else:
                self._window_bytes += len(data)
            if self.flow.read_paused:
                self._window_paused = True  # the server's buffer is full, not the client slow
        else:
            self._head_armed = False
            self._disarm()
            self._disarm_request()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._head_armed = False  # uvicorn's keep-alive timer waits for the next request
        self._disarm()
        self._disarm_request()

    def _head_expired(self) -> None:
        self._read_timer = None
        if not self._head_pending() or self.transport.is_closing():
            return
        if self.cycle is not None and not self._head_armed:
            return  # kept alive after a response: uvicorn's keep-alive timer
        d = self.deadlines
        d.report("header", f"request head not complete in {d.header_timeout:g} s")
        self._close()

    def _request_expired(self) -> None:
        self._request_timer = None
        if self.transport.is_closing():
            return
        if self._head_pending():
            if self.cycle is not None and not self._head_armed:
                return  # kept alive after a response: uvicorn's keep-alive timer
        elif not self._body_pending():
            return
        d = self.deadlines
        d.report("request", f"request not complete in {d.request_timeout:g} s")
        self._close()

    def _rate_judged(self) -> None:
        self._rate_timer = None
        if not self._body_pending() or self.transport.is_closing():
            return
        least, window = self.deadlines.min_body_rate or (0, 1.0)
        if self._window_bytes < least and not self._window_paused:
            self.deadlines.report("rate", f"request body under {least} bytes in {window:g} s")
            self._close()
            return
        self._watch_rate()

    def _body_expired(self) -> None:
        self._read_timer = None
        if self._body_pending() and not self.transport.is_closing():
            d = self.deadlines
            d.report("body", f"request body stalled for {d.body_timeout:g} s")
            self._close()

    def _close(self) -> None:
        self._disarm()
        self._disarm_request()
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
        d.report("send", f"response not read for {d.send_timeout:g} s")
        self.transport.abort()  # drops the unsent bytes

    def _release(self) -> None:
        if self._admitted and self.deadlines.caps is not None:
            self.deadlines.caps.release(self._address)
        self._admitted = False

    def handle_websocket_upgrade(self, *args: Any) -> None:
        # the upgraded connection leaves this protocol (and its connection_lost): uncounted
        self._disarm()
        self._disarm_request()
        self._release()
        super().handle_websocket_upgrade(*args)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._disarm_request()
        if self._send_timer is not None:
            self._send_timer.cancel()
            self._send_timer = None
        self._release()
        super().connection_lost(exc)


def _positive(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{name} must be a positive number of seconds, not {value!r}")


def guarded_protocol(
    base: type[Any],
    *,
    header_timeout: float,
    body_timeout: float,
    send_timeout: float,
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
    min_body_rate: tuple[int, float] | None = DEFAULT_MIN_BODY_RATE,
    caps: ConnectionCaps | None = None,
    stats: SlowClientStats | None = None,
    max_head_bytes: int = DEFAULT_MAX_HEAD_BYTES,
    max_headers: int = DEFAULT_MAX_HEADERS,
) -> type[Any]:
    """``base`` (uvicorn's ``H11Protocol`` or ``HttpToolsProtocol``, or a subclass) with the
    deadlines, caps and head limits of the module's docstring; a class for
    ``uvicorn.Config(http=..., ws="none")``. ``min_body_rate`` ``None``: no minimum;
    ``caps`` ``None``: connections uncounted. Give every listener of the process the same
    ``caps`` (or the same class). Also throttles the per-request warnings of
    :func:`throttle_attack_logs`."""
    for name, value in (
        ("header_timeout", header_timeout),
        ("body_timeout", body_timeout),
        ("send_timeout", send_timeout),
        ("request_timeout", request_timeout),
    ):
        _positive(name, value)
    if min_body_rate is not None:
        least, window = min_body_rate
        if isinstance(least, bool) or not isinstance(least, int) or least < 1:
            raise ValueError(f"min_body_rate: BYTES must be a positive integer, not {least!r}")
        _positive("min_body_rate's window", window)
    for name, count in (("max_head_bytes", max_head_bytes), ("max_headers", max_headers)):
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"{name} must be a positive integer, not {count!r}")
    deadlines = Deadlines(
        header_timeout,
        body_timeout,
        send_timeout,
        stats if stats is not None else SlowClientStats(),
        request_timeout,
        min_body_rate,
        caps,
        max_head_bytes,
        max_headers,
    )
    throttle_attack_logs()
    bases = (head_limits(base), _WithDeadlines, base)
    return type(f"Guarded{base.__name__}", bases, {"deadlines": deadlines})
