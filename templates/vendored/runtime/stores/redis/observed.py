"""The Redis client's reconnects, counted for operators (``observe.store_retried``).

A connection Redis closed (a restart, ``CLIENT KILL``, a network blip) is made again by the
client in one of two places, depending on redis-py's version: before a command is sent (the
pool finds the socket dead as it hands the connection out: redis-py 8.2 and later) or after
a command failed on it (the retry policy disconnects and sends the command again). Both end
in the connection's connect callback, so a reconnect is counted there: one ``reconnect`` for
every connect of a connection that had been connected before, whichever path made it.
"""

from __future__ import annotations

from typing import Any

from ...observe import store_retried, store_retry

#: set on a redis-py connection once it has connected (connections keep a ``__dict__``)
_CONNECTED_BEFORE = "_mcp_tasks_connected_before"


async def on_connect_counting_reconnects(connection: Any) -> None:
    """``redis_connect_func`` for the store's client: the connection's own handshake
    (``on_connect``: AUTH, SELECT, CLIENT SETNAME), then one ``reconnect`` if this connection
    had been connected before."""
    await connection.on_connect()
    if getattr(connection, _CONNECTED_BEFORE, False):
        if store_retried:
            store_retry("reconnect")
    else:
        setattr(connection, _CONNECTED_BEFORE, True)
