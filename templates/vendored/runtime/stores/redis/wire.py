"""The store's own connection to Redis: one socket, a pipeline out and its replies back,
packed and parsed by ``hiredis`` (the Redis project's C protocol library).

Why: the store sends one pipeline at a time (``scripting.ScriptRunner``), so it needs no
connection pool, and redis-py's asyncio pipeline costs several times the round trip itself
in Python (a pipeline object, per-command packing and options, a timeout context and a
parser call per reply, the retry and pool layers): about 0.4 ms of client CPU for the five
commands of a creation and the two of an outcome, against about 0.1 ms here.

``Wire.of(client)`` makes one from a redis-py client's connection settings (host and port or
a Unix socket, database, username and password, client name, timeouts, its retry policy);
None when ``hiredis`` is not installed or the client connects in a way this does not
(TLS, Sentinel, Cluster, a credential provider): the store then sends through redis-py.

Failures are redis-py's: ``ConnectionError`` (refused, closed, lost) and ``TimeoutError``
(no reply within the socket timeout), each retried as the client's retry policy says on a
new connection; a reply that is an error is a ``ResponseError`` (``NoScriptError`` for a
script Redis does not have) handed back in its place, as redis-py's
``execute(raise_on_error=False)`` does.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Callable, Sequence
from typing import Any

from redis.asyncio.connection import Connection, UnixDomainSocketConnection
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import (
    AuthenticationError,
    ConnectionError,
    DataError,
    NoScriptError,
    ResponseError,
)
from redis.exceptions import TimeoutError as RedisTimeoutError

from ...observe import store_retried, store_retry

hiredis: Any  # the ``redis`` extra installs it; without it the store sends through redis-py
try:
    hiredis = importlib.import_module("hiredis")
except ImportError:  # pragma: no cover - exercised where hiredis is absent
    hiredis = None

__all__ = ["Wire", "pack"]

#: what a client's connection class must be for ``Wire.of`` to speak for it
_PLAIN = (Connection, UnixDomainSocketConnection)


def pack(args: Sequence[Any]) -> bytes:
    """One command in Redis' protocol. A value the protocol cannot carry raises before
    anything is sent: ``DataError`` (not text, bytes or a number), ``UnicodeError`` (text
    UTF-8 cannot carry), as redis-py's own packing does."""
    try:
        return hiredis.pack_command(tuple(args))  # type: ignore[no-any-return]
    except UnicodeError:
        raise
    except (TypeError, ValueError) as exc:
        raise DataError(f"invalid argument for Redis: {exc}") from None


def _error(reply: ResponseError) -> ResponseError:
    """A reply that is an error, as redis-py names it (the store looks for NOSCRIPT)."""
    text = str(reply)
    if text.startswith("NOSCRIPT"):
        return NoScriptError(text)
    return reply


class _Protocol(asyncio.Protocol):
    """The socket: replies parsed as they arrive, handed over once a pipeline's are all in."""

    def __init__(self) -> None:
        self.reader = hiredis.Reader(encoding="utf-8", replyError=ResponseError)
        #: asyncio's or uvloop's (which is no ``asyncio.Transport`` subclass)
        self.transport: Any = None
        self.lost: BaseException | None = None
        self.want = 0
        self.replies: list[Any] = []
        self.waiter: asyncio.Future[list[Any]] | None = None
        #: the loop it runs on (asked once: asking costs a system call on CPython 3.11)
        self.loop = asyncio.get_running_loop()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        reader, replies = self.reader, self.replies
        reader.feed(data)
        try:
            while (reply := reader.gets()) is not False:
                replies.append(_error(reply) if isinstance(reply, ResponseError) else reply)
        except Exception as exc:  # a protocol error: this connection is done
            self._fail(ConnectionError(f"Redis protocol error: {exc}"))
            return
        waiter = self.waiter
        if len(replies) >= self.want and waiter is not None:
            self.waiter, self.replies = None, []
            if not waiter.done():
                waiter.set_result(replies)

    def connection_lost(self, exc: BaseException | None) -> None:
        self._fail(ConnectionError(f"Connection closed by server ({exc or 'EOF'})"))

    def _fail(self, exc: BaseException) -> None:
        self.lost = self.lost or exc
        if self.transport is not None:
            self.transport.close()
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)


class _Subscriber(_Protocol):
    """A subscribed connection: each pub/sub message's data goes to ``on_message`` as it
    arrives (no task, no parser call per message); the other replies to the waiter."""

    def __init__(self, on_message: Callable[[str], None]) -> None:
        super().__init__()
        self.on_message = on_message
        self.closed = asyncio.Event()

    def data_received(self, data: bytes) -> None:
        reader, replies = self.reader, self.replies
        reader.feed(data)
        try:
            while (reply := reader.gets()) is not False:
                if type(reply) is list and len(reply) == 3 and reply[0] == "message":
                    self.on_message(reply[2])
                else:
                    replies.append(reply)
        except Exception as exc:  # a protocol error (or the callback's): reconnect
            self._fail(ConnectionError(f"Redis subscription failed: {exc!r}"))
            return
        waiter = self.waiter
        if waiter is not None and len(replies) >= self.want:
            self.waiter, self.replies = None, []
            if not waiter.done():
                waiter.set_result(replies)

    def _fail(self, exc: BaseException) -> None:
        super()._fail(exc)
        self.closed.set()


class Wire:
    """One connection, one pipeline in flight at a time (the caller's to ensure)."""

    def __init__(self, settings: dict[str, Any], retry: Retry) -> None:
        self.host: str = settings.get("host") or "localhost"
        self.port = int(settings.get("port") or 6379)
        self.path: str | None = settings.get("path")
        self.db = int(settings.get("db") or 0)
        self.username: str | None = settings.get("username")
        self.password: str | None = settings.get("password")
        self.client_name: str | None = settings.get("client_name")
        self.timeout: float | None = settings.get("socket_timeout")
        self.connect_timeout: float | None = settings.get("socket_connect_timeout") or self.timeout
        self.retry = retry
        self._proto: _Protocol | None = None
        self._connected_before = False

    @classmethod
    def of(cls, client: Any) -> Wire | None:
        """A wire with ``client``'s connection settings, or None when it cannot speak for
        it (see the module)."""
        pool = getattr(client, "connection_pool", None)
        if hiredis is None or pool is None or pool.connection_class not in _PLAIN:
            return None
        settings = dict(pool.connection_kwargs)
        if settings.get("credential_provider") is not None:
            return None
        get_retry = getattr(client, "get_retry", None)
        retry = get_retry() if get_retry is not None else None
        if not isinstance(retry, Retry):
            retry = Retry(ExponentialBackoff(cap=0.2, base=0.02), 2)
        return cls(settings, retry)

    async def execute(self, commands: Sequence[bytes]) -> list[Any]:
        """The replies of the packed ``commands``, sent in one write (one round trip);
        retried on a new connection as the retry policy says when the connection fails."""
        data = b"".join(commands)
        try:
            return await self._once(data, len(commands))
        except (ConnectionError, RedisTimeoutError) as exc:
            self._drop()
            if isinstance(exc, AuthenticationError):
                raise
        return await self.retry.call_with_retry(
            lambda: self._once(data, len(commands)), self._failed
        )

    async def _failed(self, _exc: Exception) -> None:
        self._drop()

    async def _once(self, data: bytes, n: int) -> list[Any]:
        proto = self._proto
        if proto is None or proto.lost is not None:
            proto = await self._connect()
        return await self._roundtrip(proto, data, n)

    async def _roundtrip(
        self, proto: _Protocol, data: bytes, n: int, drop: bool = True
    ) -> list[Any]:
        loop = proto.loop
        waiter: asyncio.Future[list[Any]] = loop.create_future()
        proto.want, proto.waiter = n, waiter
        proto.transport.write(data)
        timer = (
            None if self.timeout is None else loop.call_later(self.timeout, self._timeout, proto)
        )
        try:
            return await waiter
        except BaseException:
            # Failed, timed out or cancelled: replies may still be on their way, and would
            # be taken for the next pipeline's. This connection is done.
            if drop:
                self._drop()
            else:
                proto.transport.close()
            raise
        finally:
            if timer is not None:
                timer.cancel()

    def _timeout(self, proto: _Protocol) -> None:
        proto._fail(RedisTimeoutError("Timeout reading from Redis"))

    async def subscribe(
        self, channel: str, on_message: Callable[[str], None], subscribed: Callable[[], None]
    ) -> None:
        """Listen to ``channel`` on a connection of its own: ``subscribed()`` once Redis
        confirmed, then ``on_message(data)`` for each message, until the connection is lost
        (``ConnectionError``) or the caller is cancelled (the connection is closed)."""
        proto = _Subscriber(on_message)
        await self._open(proto)
        try:
            await self._roundtrip(proto, pack(["SUBSCRIBE", channel]), 1, drop=False)
            subscribed()
            await proto.closed.wait()
            raise proto.lost or ConnectionError("Redis subscription closed")
        finally:
            if proto.transport is not None:
                proto.transport.close()

    async def _connect(self) -> _Protocol:
        self._drop()
        proto = _Protocol()
        await self._open(proto)
        self._proto = proto
        if self._connected_before and store_retried:
            store_retry("reconnect")
        self._connected_before = True
        return proto

    async def _open(self, proto: _Protocol) -> None:
        """Connect ``proto`` and say hello (AUTH, SELECT, CLIENT SETNAME as set)."""
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.connect_timeout):
                if self.path is not None:
                    await loop.create_unix_connection(lambda: proto, self.path)
                else:
                    await loop.create_connection(lambda: proto, self.host, self.port)
        except (OSError, TimeoutError) as exc:
            where = self.path or f"{self.host}:{self.port}"
            raise ConnectionError(f"Error connecting to {where}: {exc}") from exc
        hello: list[bytes] = []
        if self.password is not None:
            auth = [self.username, self.password] if self.username else [self.password]
            hello.append(pack(["AUTH", *auth]))
        if self.db:
            hello.append(pack(["SELECT", self.db]))
        if self.client_name:
            hello.append(pack(["CLIENT", "SETNAME", self.client_name]))
        if hello:
            for reply in await self._roundtrip(proto, b"".join(hello), len(hello), drop=False):
                if isinstance(reply, ResponseError):
                    proto.transport.close()
                    raise AuthenticationError(str(reply))

    def _drop(self) -> None:
        proto, self._proto = self._proto, None
        if proto is not None and proto.transport is not None:
            proto.transport.close()

    def close(self) -> None:
        """Close the connection (a later call opens a new one)."""
        self._drop()
