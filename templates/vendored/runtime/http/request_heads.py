"""Request heads bounded: uvicorn's HTTP protocols with a limit on a request head's bytes and
header fields, which uvicorn's ``httptools`` protocol lacks (:func:`head_limits`, mixed in
by :func:`~.slow_clients.guarded_protocol`, which holds the limits in its ``Deadlines``).

A request head (its request line and header fields) is held in memory until it ends and is
read before anything else sees the request (the app, a bearer token's check): without a
bound one client could make the process hold gigabytes. A head must end within
``max_head_bytes`` bytes and hold at most ``max_headers`` fields, or the connection is
answered HTTP 431 (naming the limit) and closed, nothing more of it read.

Both parsers are held alike. The bytes of the head being read are counted as they arrive
and fed to the parser no further than the limit: a head still going on there is refused,
else the rest of the read (its body, the next requests) is fed the same way; a head that
began in the same read as the end of an earlier request (pipelined) is counted from the
read after. ``httptools`` hands the fields over one by one (the first past the limit refuses
the head, and the parser then goes through the rest of the read without effect);
``h11`` parses a head once it is whole, in a buffer its ``max_incomplete_event_size``
bounds, set to the same limit: its own refusal, and a head with too many fields, are
answered here the same way, not as uvicorn's 400.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

__all__ = ["DEFAULT_MAX_HEADERS", "DEFAULT_MAX_HEAD_BYTES", "head_limits"]

#: bytes of one request head (request line and header fields), at most
DEFAULT_MAX_HEAD_BYTES: Final = 64 * 1024
#: header fields of one request head, at most
DEFAULT_MAX_HEADERS: Final = 100

#: the protocol class a limit class is mixed into (uvicorn's; any to the type checker)
_Protocol: Any = object


def _refusal_answer(reason: str) -> bytes:
    """The whole answer to a request head over a limit: nothing else is read from it."""
    body = f"Request head too large: {reason}".encode()
    return (
        b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain;"
        b" charset=utf-8\r\nconnection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
    )


class _HeadLimits(_Protocol):  # type: ignore[misc]
    """The byte count and the refusal, over a stack's parser (its mixin below says whether
    a head is being read, how many requests began and ended, and why it refused one).
    ``deadlines`` (``slow_clients.Deadlines``) holds the limits and counts the refusals."""

    deadlines: Any

    def connection_made(self, transport: asyncio.Transport) -> None:
        #: bytes of the request head being read so far
        self._head_bytes = 0
        self._head_refused = False
        super().connection_made(transport)

    def _reading_head(self) -> bool:
        """Whether the parser reads a request head, or waits for one."""
        raise NotImplementedError

    def _refusal(self) -> str | None:
        """Why the parser refused the head it read (too many fields), else ``None``."""
        raise NotImplementedError

    def _messages(self) -> tuple[int, int]:
        """How many requests the parser began and ended so far ((0, 0) where it parses a
        head only once it is whole)."""
        return 0, 0

    def data_received(self, data: bytes) -> None:
        if self._head_refused:
            return  # answered and closing
        limit = self.deadlines.max_head_bytes
        while self._reading_head() and self._head_bytes + len(data) > limit:
            # no further than the limit into the parser: a head still going on there is
            # refused; else the rest (its body, the next requests) is fed the same way
            room = limit - self._head_bytes
            if room > 0:
                first, data = data[:room], data[room:]
                self._feed(first)
                if self._head_refused or self.transport.is_closing():
                    return
            if self._reading_head() and self._head_bytes >= limit:
                self._refuse_head(f"over {limit} bytes")
                return
        if data:  # (h11 takes empty data for the client's end of the connection)
            self._feed(data)

    def _feed(self, data: bytes) -> None:
        reading = self._reading_head()
        before = self._messages()
        super().data_received(data)
        refusal = self._refusal()
        if refusal is not None:
            self._refuse_head(refusal)
            return
        # the bytes of the head being read: this read counted while the same head goes on,
        # all of it for a head begun in it from idle, none for a head begun after another
        # request ended in it (counted from the next read)
        if not self._reading_head():
            self._head_bytes = 0
            return
        now = self._messages()
        if now == before:
            self._head_bytes = self._head_bytes + len(data) if reading else 0
        elif now == (before[0] + 1, before[1]) and before[0] == before[1]:
            self._head_bytes = len(data)
        else:
            self._head_bytes = 0

    def _refuse_head(self, reason: str) -> None:
        """HTTP 431 and the connection closed: nothing more of it is read."""
        self._head_refused = True
        self.deadlines.report("head_size", f"{reason} (HTTP 431)")
        self.transport.write(_refusal_answer(reason))
        self.transport.close()


class _HttpToolsHead(_HeadLimits):
    """On uvicorn's ``httptools`` protocol: the head is read from a request's start to
    ``on_headers_complete``; the fields are counted as the parser hands them over."""

    def connection_made(self, transport: asyncio.Transport) -> None:
        self._in_body = False
        self._headers_seen = 0
        self._begun = self._ended = 0
        self._too_many: str | None = None
        super().connection_made(transport)

    def _reading_head(self) -> bool:
        return not self._in_body

    def _refusal(self) -> str | None:
        return self._too_many

    def _messages(self) -> tuple[int, int]:
        return self._begun, self._ended

    def on_message_begin(self) -> None:
        self._headers_seen = 0
        self._begun += 1
        super().on_message_begin()

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._too_many is not None:
            return
        self._headers_seen += 1
        most = self.deadlines.max_headers
        if self._headers_seen > most:
            self._too_many = f"over {most} header fields"
            return
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        if self._too_many is None:
            self._in_body = True
            super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if self._too_many is None:
            super().on_body(body)

    def on_message_complete(self) -> None:
        if self._too_many is None:
            self._in_body = False
            self._ended += 1
            super().on_message_complete()


class _H11Head(_HeadLimits):
    """On uvicorn's ``h11`` protocol: its ``h11.Connection`` bounds the head's bytes itself
    (``max_incomplete_event_size``) and counts the fields of the request it parses."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        d = self.deadlines
        self.conn = _limited_h11(d.max_head_bytes, d.max_headers)

    def _reading_head(self) -> bool:
        reading: bool = self.conn.reading_head()
        return reading

    def _refusal(self) -> str | None:
        refused: str | None = self.conn.refused
        return refused


def _limited_h11(max_bytes: int, max_headers: int) -> Any:
    """A server's ``h11.Connection`` whose head over ``max_bytes`` or ``max_headers``
    fields is not an event: its ``refused`` says why, and it asks for more data (the
    protocol answers and closes) instead of raising for uvicorn to answer 400."""
    import h11

    class Limited(h11.Connection):
        refused: str | None = None

        def reading_head(self) -> bool:
            """Whether the peer's next bytes are (part of) a request head."""
            return self.their_state is h11.IDLE

        def next_event(self) -> Any:
            if self.refused is not None:
                return h11.NEED_DATA
            try:
                event = super().next_event()
            except h11.RemoteProtocolError as exc:
                if exc.error_status_hint != 431:
                    raise
                self.refused = f"over {max_bytes} bytes"
                return h11.NEED_DATA
            if isinstance(event, h11.Request) and len(event.headers) > max_headers:
                self.refused = f"over {max_headers} header fields"
                return h11.NEED_DATA
            return event

    return Limited(h11.SERVER, max_incomplete_event_size=max_bytes)


def head_limits(base: type[Any]) -> type[Any]:
    """The mixin holding request heads to their limits on ``base`` (uvicorn's
    ``HttpToolsProtocol`` or ``H11Protocol``, or a subclass): put it before ``base``, in a
    class whose ``deadlines`` holds the limits (``ValueError`` for another protocol)."""
    if hasattr(base, "on_header"):  # httptools: its parser's callbacks
        return _HttpToolsHead
    if hasattr(base, "handle_events"):  # h11: its Connection
        return _H11Head
    raise ValueError(f"{base.__name__}: not uvicorn's httptools or h11 protocol")
