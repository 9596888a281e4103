"""Who a request is from (R-SEC-1, X-SEC-1): the requestor key tasks are bound to.

- a bearer token's subject when the SDK's auth hooks give one (``subject:...``): it
  survives sessions, reconnects and instances;
- else the transport session: the ``Mcp-Session-Id`` of a Streamable HTTP session
  (``session:...``), or the stdio connection (``stdio:...``, one per connection);
- else nobody: stateless HTTP without auth, and every request of the extension face
  without auth (it has no session), is :data:`ANONYMOUS` with the client's address
  (``anonymous:ADDRESS``): the tasks of one address are not reachable from another, and its
  limits are its own, so one anonymous client never locks out those of other addresses
  (behind a proxy every client has the proxy's address: use bearer tokens). Such a
  requestor "identifies" no one (R-SEC-2): ``tasks.list`` is then neither declared nor
  served.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any, Final

from ._sdk import connection_of, current_subject

__all__ = [
    "ANONYMOUS",
    "SESSION_PREFIXES",
    "client_address",
    "http_requestor",
    "identifies",
    "requestor_of",
    "session_bound",
]

#: The requestor of every request that identifies nobody.
ANONYMOUS: Final = "anonymous"
_ANONYMOUS_PREFIX: Final = ANONYMOUS + ":"
#: The prefixes of requestors bound to a transport session (they end with it).
SESSION_PREFIXES: Final = ("session:", "stdio:")
_STDIO_KEY = "mcp_tasks.requestor"


def http_requestor(session_id: str | None, address: str | None = None) -> str:
    """The requestor key of an HTTP request being served: the bearer token's subject, else
    the session, else :data:`ANONYMOUS` at the client's ``address`` (when known)."""
    subject = current_subject()
    if subject is not None:
        return f"subject:{subject}"
    if session_id is not None:
        return f"session:{session_id}"
    return f"{ANONYMOUS}:{address}" if address else ANONYMOUS


def identifies(requestor: str) -> bool:
    """Whether ``requestor`` tells one client apart (R-SEC-2): not an anonymous one."""
    return requestor != ANONYMOUS and not requestor.startswith(_ANONYMOUS_PREFIX)


def client_address(scope: Mapping[str, Any] | None) -> str | None:
    """The client's host in an ASGI ``scope`` (None when the server does not know it)."""
    client = scope.get("client") if scope is not None else None
    return str(client[0]) if client else None


def requestor_of(ctx: Any, *, sessionless: bool = False) -> tuple[str, bool]:
    """(requestor key, whether it identifies someone) of the SDK request context ``ctx``.
    ``sessionless``: the face has no session (the extension): the subject or nobody."""
    conn = connection_of(ctx.session)
    address = client_address(getattr(ctx.request, "scope", None))
    if sessionless:
        key = http_requestor(None, address)
        return key, identifies(key)
    stdio = ctx.request is None and conn.session_id is None
    if stdio and current_subject() is None:  # stdio: one connection, one requestor
        stdio_key = conn.state.get(_STDIO_KEY)
        if stdio_key is None:
            stdio_key = conn.state[_STDIO_KEY] = f"stdio:{secrets.token_hex(16)}"
        return str(stdio_key), True
    key = http_requestor(conn.session_id, address)
    return key, identifies(key)


def session_bound(requestor: str) -> bool:
    """Whether ``requestor`` is a transport session's (its tasks end with the session)."""
    return requestor.startswith(SESSION_PREFIXES)


def has_channel(conn: Any) -> bool:
    """Whether ``conn`` outlives its request (a session or stdio): a status notification
    sent there can reach the client later. A stateless HTTP request's connection cannot."""
    return conn.session_id is not None or bool(conn.state.get(_STDIO_KEY))
