"""Who a request is from (R-SEC-1, X-SEC-1): the requestor key tasks are bound to.

- a bearer token's subject when the SDK's auth hooks give one (``subject:...``): it
  survives sessions, reconnects and instances;
- else the transport session: the ``Mcp-Session-Id`` of a Streamable HTTP session
  (``session:...``), or the stdio connection (``stdio:...``, one per connection);
- else nobody: stateless HTTP without auth, and every request of the extension face
  without auth (it has no session), is :data:`ANONYMOUS` with the client's address
  (``anonymous:ADDRESS``): the tasks of one address are not reachable from another, and its
  limits are its own, so one anonymous client never locks out those of other addresses.
  The address is the ASGI scope's ``client``: the socket's peer, unless the server
  rewrites it from ``X-Forwarded-For`` (uvicorn's ``proxy_headers``; the example server
  only for the proxies of ``--forwarded-allow-ips``, never by default). Behind a proxy
  that is not trusted so, every client has the proxy's address: use bearer tokens. Such a
  requestor "identifies" no one (R-SEC-2): ``tasks.list`` is then neither declared nor
  served.

The tasks and bytes kept (R-SEC-4) are counted per requestor, except that every requestor
without a token at one client address shares one budget (:func:`budget_of`): the sessions
opened from it and its anonymous requests, so that opening sessions does not multiply them.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any, Final

from pydantic import AnyHttpUrl

from ..sdk import AccessToken, AuthSettings, TokenVerifier, connection_of, current_subject

__all__ = [
    "ANONYMOUS",
    "ADDRESS_BUDGET",
    "SESSION_PREFIXES",
    "StaticTokens",
    "bearer_tokens",
    "budget_of",
    "client_address",
    "http_requestor",
    "identifies",
    "note_address",
    "request_origin",
    "requestor_key",
    "requestor_of",
    "session_bound",
]

#: The requestor of every request that identifies nobody.
ANONYMOUS: Final = "anonymous"
_ANONYMOUS_PREFIX: Final = ANONYMOUS + ":"
#: The prefixes of requestors bound to a transport session (they end with it).
SESSION_PREFIXES: Final = ("session:", "stdio:")
_STDIO_KEY = "mcp_tasks.requestor"
#: the client address an HTTP session was opened from (``Connection.state``)
_ADDRESS_KEY = "mcp_tasks.address"
#: the prefix of a budget shared by a client address's requestors without a token
ADDRESS_BUDGET: Final = "address:"


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


def requestor_key(
    session_id: str | None, address: str | None, stdio: Any = None
) -> tuple[str, bool]:
    """(requestor key, whether it identifies someone) of a request, the one rule both front
    doors use: the bearer token's subject, else the ``stdio`` connection's own key (a request
    that came on no HTTP: one connection, one requestor), else the transport session
    ``session_id``, else :data:`ANONYMOUS` at the client's ``address``."""
    if stdio is not None and current_subject() is None:
        stdio_key = stdio.state.get(_STDIO_KEY)
        if stdio_key is None:
            stdio_key = stdio.state[_STDIO_KEY] = f"stdio:{secrets.token_hex(16)}"
        return str(stdio_key), True
    key = http_requestor(session_id, address)
    return key, identifies(key)


def request_origin(ctx: Any, *, sessionless: bool = False) -> tuple[str | None, str | None, Any]:
    """(transport session id, client address, stdio connection or None) of the SDK request
    context ``ctx``: what :func:`requestor_key` reads. ``sessionless``: the face has no
    session (the extension): the subject or nobody."""
    address = client_address(getattr(ctx.request, "scope", None))
    if sessionless:
        return None, address, None
    conn = connection_of(ctx.session)
    stdio = conn if ctx.request is None and conn.session_id is None else None
    return conn.session_id, address, stdio


def requestor_of(ctx: Any, *, sessionless: bool = False) -> tuple[str, bool]:
    """(requestor key, whether it identifies someone) of the SDK request context ``ctx``."""
    return requestor_key(*request_origin(ctx, sessionless=sessionless))


def session_bound(requestor: str) -> bool:
    """Whether ``requestor`` is a transport session's (its tasks end with the session)."""
    return requestor.startswith(SESSION_PREFIXES)


def has_channel(conn: Any) -> bool:
    """Whether ``conn`` outlives its request (a session or stdio): a status notification
    sent there can reach the client later. A stateless HTTP request's connection cannot."""
    return conn.session_id is not None or bool(conn.state.get(_STDIO_KEY))


def note_address(conn: Any, scope: Mapping[str, Any] | None) -> None:
    """Remember the client address of an HTTP session's ``initialize`` (the address that
    opened it, as the per-requestor session cap counts it): :func:`budget_of` reads it."""
    address = client_address(scope)
    if address is not None and conn.session_id is not None:
        conn.state.setdefault(_ADDRESS_KEY, address)


def budget_of(requestor: str, conn: Any | None = None) -> str | None:
    """What the new tasks of ``requestor`` count against among the tasks and bytes kept
    (R-SEC-4) when it is not theirs alone: ``address:ADDR`` for a requestor without a token,
    an anonymous one at ADDR or a session opened from ADDR (``conn``, its connection), so
    that a client cannot multiply those caps by opening sessions; None for a token's
    subject, stdio, and a session whose address is unknown (its own budget)."""
    if requestor.startswith(_ANONYMOUS_PREFIX):
        return ADDRESS_BUDGET + requestor[len(_ANONYMOUS_PREFIX) :]
    if conn is not None and requestor.startswith("session:"):
        address = conn.state.get(_ADDRESS_KEY)
        if address:
            return f"{ADDRESS_BUDGET}{address}"
    return None


class StaticTokens(TokenVerifier):
    """Bearer tokens from a fixed map (token -> subject), through the SDK's auth hooks: for
    trying things out and for tests. In production check tokens your own way (a JWT,
    introspection) in a ``TokenVerifier`` of your own."""

    def __init__(self, tokens: Mapping[str, str]) -> None:
        self.tokens = dict(tokens)

    async def verify_token(self, token: str) -> AccessToken | None:
        subject = self.tokens.get(token)
        if subject is None:
            return None
        return AccessToken(token=token, client_id=f"client-{subject}", scopes=[], subject=subject)


def bearer_tokens(tokens: Mapping[str, str]) -> dict[str, Any]:
    """The ``MCPServer`` arguments that check bearer tokens against ``tokens`` (token ->
    subject; the SDK answers HTTP 401 to any other): ``MCPServer("app", **bearer_tokens(t))``.
    A task then belongs to the token's subject, not to the session (R-SEC-1)."""
    settings = AuthSettings(issuer_url=AnyHttpUrl("http://127.0.0.1:1/"), resource_server_url=None)
    return {"token_verifier": StaticTokens(tokens), "auth": settings}
