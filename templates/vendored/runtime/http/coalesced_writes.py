"""A response in one system call: uvicorn's HTTP protocol with its writes of one event-loop
turn joined.

uvicorn writes a response's head when the app sends ``http.response.start`` and its body
when the app sends ``http.response.body``, each straight to the socket: two ``send``
system calls and two TCP segments (the socket has ``TCP_NODELAY``) for every answer, the
second of them the one the client waits for. :func:`coalesced_writes` subclasses uvicorn's
protocol class so that the transport its requests see holds a write until the next one or the
end of the event loop's turn (``loop.call_soon``), whichever comes first, and then hands both
to the real transport as one: the head and the body of an answer go out together; a head or
an event that nothing follows in its turn waits no longer than that turn.

Nothing is lost or reordered: closing the transport (or its write side) writes what is held
first; aborting it drops what is held with what the real transport holds (as an abort drops
unsent bytes); the write-buffer size the protocol's flow control reads counts what is held.
Flow control itself is the real transport's (``pause_writing`` when its buffer is full):
uvicorn waits for it before each write as before, so a client that does not read is held
back as before.
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["HeldWrites", "coalesced_writes"]


class HeldWrites:
    """The transport the protocol's requests write to: a write held until the next one or
    the loop turn's end, then both as one write of ``transport``; anything else is
    ``transport``'s own."""

    __slots__ = ("_held", "_loop", "transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self.transport = transport
        self._loop = loop
        self._held: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        if self._held:  # a body after its head: both go now
            self._held.append(bytes(data))
            self.flush()
            return
        self._loop.call_soon(self.flush)
        self._held.append(bytes(data))

    def writelines(self, lines: Any) -> None:
        for data in lines:
            self.write(data)

    def flush(self) -> None:
        """Write what is held (nothing once the transport is closing: it is gone)."""
        held = self._held
        if not held:
            return
        self._held = []
        if not self.transport.is_closing():
            self.transport.write(held[0] if len(held) == 1 else b"".join(held))

    def close(self) -> None:
        self.flush()
        self.transport.close()

    def write_eof(self) -> None:
        self.flush()
        self.transport.write_eof()

    def abort(self) -> None:
        self._held = []
        self.transport.abort()

    def get_write_buffer_size(self) -> int:
        return self.transport.get_write_buffer_size() + sum(len(d) for d in self._held)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)


def coalesced_writes(base: type[Any]) -> type[Any]:
    """``base`` (uvicorn's ``HttpToolsProtocol`` or ``H11Protocol``, or a subclass) whose
    requests write through :class:`HeldWrites`."""

    def connection_made(self: Any, transport: asyncio.Transport) -> None:
        base.connection_made(self, transport)
        self.transport = HeldWrites(transport, self.loop)

    return type(base.__name__, (base,), {"connection_made": connection_made})
