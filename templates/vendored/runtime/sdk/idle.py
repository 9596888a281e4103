"""A session's idle countdown while the task endpoint serves its requests: what the SDK's
``StreamableHTTPServerTransport.handle_request`` does (a session with no request in flight
for ``session_idle_timeout`` seconds ends), with one timer per session instead of one per
request.

The SDK keeps the countdown in the transport's ``idle_scope``, an anyio ``CancelScope``:
each request it serves sets the scope's deadline to infinity as it enters and to now +
timeout as the last one in flight leaves, a timer cancelled and one scheduled per request
(on CPython 3.11 each also asks the kernel for the pid twice, on the way to the running
loop). A request the task endpoint serves (:class:`InFlight`) counts in the same
``_requests_in_flight``, so the SDK's own requests never restart the countdown under it,
and on leaving only notes the time. One watcher per session, a timer on the event loop,
fires when that time is ``timeout`` old, and then sets the scope's deadline to it: the
SDK's scope ends the session exactly as if the SDK had set that deadline itself; when a
request came since, the watcher waits again for the rest. A request that enters while the
SDK's own countdown runs (the last request to leave was one of the SDK's) stops it, as the
SDK's entry does. Off asyncio (no event loop to time on) the SDK's own way is kept.

Private SDK names (listed in :mod:`.assumptions`, with their canary):
``idle_scope``, ``_idle_timeout``, ``_requests_in_flight``.
"""

from __future__ import annotations

import asyncio
import math
import weakref
from typing import Any

import anyio

__all__ = ["InFlight"]


class _Watch:
    """The idle timer of one session's transport, for the requests :class:`InFlight` holds."""

    __slots__ = ("_handle", "_last", "_loop", "_timeout", "_transport")

    def __init__(self, transport: Any, loop: asyncio.AbstractEventLoop, timeout: float) -> None:
        # the transport by weak reference: the watch is the value of a weak-keyed map
        self._transport = weakref.ref(transport)
        self._loop = loop
        self._timeout = timeout
        self._last = 0.0
        self._handle: asyncio.TimerHandle | None = None

    def left(self) -> None:
        """The last request in flight left: the countdown runs from now."""
        self._last = self._loop.time()
        if self._handle is None:
            self._handle = self._loop.call_at(self._last + self._timeout, self._fire)

    def _fire(self) -> None:
        self._handle = None
        transport = self._transport()
        if transport is None or transport._requests_in_flight:
            return  # the session is gone; or a request is in flight: it restarts this as it leaves
        scope = transport.idle_scope
        if scope is None or scope.cancel_called or scope.deadline != math.inf:
            return  # the session is ending; or the SDK's own countdown runs (its request left last)
        due = self._last + self._timeout
        if self._loop.time() >= due:
            scope.deadline = due  # in the past: the scope is cancelled now, the session ends
        else:
            self._handle = self._loop.call_at(due, self._fire)


_WATCHES: weakref.WeakKeyDictionary[Any, _Watch] = weakref.WeakKeyDictionary()


def _watch(transport: Any) -> _Watch | None:
    """The watch of ``transport``'s session (one with an idle timeout), made on its first
    request; None off asyncio."""
    watch = _WATCHES.get(transport)
    if watch is None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return None
        watch = _WATCHES[transport] = _Watch(transport, loop, transport._idle_timeout)
    return watch


class InFlight:
    """Holds a session's idle countdown while the task endpoint serves one of its requests
    (see the module's docstring)."""

    __slots__ = ("timed", "transport", "watch")

    def __init__(self, transport: Any) -> None:
        self.transport = transport
        self.timed = transport.idle_scope is not None and transport._idle_timeout is not None
        self.watch = _watch(transport) if self.timed else None

    def __enter__(self) -> None:
        if not self.timed:
            return
        t = self.transport
        t._requests_in_flight += 1
        if self.watch is None or t.idle_scope.deadline != math.inf:
            t.idle_scope.deadline = math.inf  # the SDK's own countdown stops, as its entry does

    def __exit__(self, *exc: object) -> None:
        if not self.timed:
            return
        t = self.transport
        t._requests_in_flight -= 1
        if t._requests_in_flight:
            return
        if self.watch is not None:
            self.watch.left()
        else:  # off asyncio: as the SDK's transport does
            t.idle_scope.deadline = anyio.current_time() + t._idle_timeout
