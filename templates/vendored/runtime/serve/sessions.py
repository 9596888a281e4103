"""The clients' connections as the server knows them: where a requestor's status
notifications go (R-NOTIFY-1), the live HTTP sessions the task endpoint serves, and what
happens to a session's tasks when it ends.

- :meth:`Sessions.bind`: a requestor's status notifications go to this connection too
  (stateless HTTP connections excluded: a connection per request, no channel after it).
- :meth:`Sessions.on_status` (an engine listener): a status change rendered by the face
  handler of the task (``status_notification``) and sent to the requestor's connections,
  best effort: at most :data:`NOTIFY_BACKLOG` wait per connection, the rest are dropped
  (R-NOTIFY-1 is a MAY; requestors never rely on them, R-NOTIFY-2).
- :meth:`Sessions.watch_end`: once per session-bound connection that starts tasks, cancel
  its requestor's unfinished tasks when the session ends (nobody could reach them after).
- :class:`SessionQuota`: at most so many open Streamable HTTP sessions per requestor, under
  the SDK's global cap, so one requestor at its cap never refuses another.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Mapping
from typing import Any, Final

import anyio
import pydantic_core

from ...errors import SessionLimitExceeded
from ...store import TaskRecord
from ..engine.task_engine import TaskEngine
from ..sdk import (
    MCP_SESSION_ID_HEADER,
    Connection,
    current_subject,
    live_session,
    on_connection_close,
    session_count,
    standalone_delivers,
)
from .identity import client_address, has_channel, session_bound

__all__ = ["NOTIFY_BACKLOG", "SessionQuota", "Sessions"]

log = logging.getLogger(__name__)

#: status notifications that may wait per connection before more are dropped (R-NOTIFY-2)
NOTIFY_BACKLOG: Final = 8
_WATCHED_KEY = "mcp_tasks.session_end_watched"
#: the statusMessage of a task cancelled because its session ended
SESSION_ENDED_MESSAGE: Final = "The task's session ended"


class Sessions:
    """Connections by requestor and HTTP sessions by id, for one server."""

    def __init__(
        self,
        server: Any,
        engine: TaskEngine,
        handlers: Mapping[str, Any],
        *,
        cancel_on_session_end: bool = True,
    ) -> None:
        self.server = server
        self.engine = engine
        self.handlers = handlers
        self.cancel_on_session_end = cancel_on_session_end
        self._connections: dict[str, weakref.WeakSet[Connection]] = {}
        #: status notifications waiting to be handed to each connection
        self._notifying: weakref.WeakKeyDictionary[Connection, int] = weakref.WeakKeyDictionary()
        #: status notifications dropped (a connection's backlog was full)
        self.notifications_dropped = 0
        #: HTTP session id -> its connection (learnt at ``initialize``; for the task endpoint)
        self._by_id: weakref.WeakValueDictionary[str, Connection] = weakref.WeakValueDictionary()
        self._prune_at = 1024
        engine.on_status.append(self.on_status)

    # ------------------------------------------------------------------ HTTP sessions
    def note(self, conn: Connection) -> None:
        """A session past ``initialize``: the task endpoint may serve it."""
        if conn.session_id is not None:
            self._by_id[conn.session_id] = conn

    def connection(self, session_id: str) -> Connection | None:
        """The connection of a live HTTP session that went through ``initialize`` here."""
        return self._by_id.get(session_id)

    # ------------------------------------------------------------------ binding
    def bind(self, requestor: str, conn: Connection | None) -> None:
        """Send ``requestor``'s status notifications to ``conn`` too (R-NOTIFY-1)."""
        if conn is None or not has_channel(conn):
            return
        conns = self._connections.get(requestor)
        if conns is None:
            if len(self._connections) >= self._prune_at:
                # Requestors whose connections are all gone: drop them (amortised O(1)),
                # else every session ever seen would stay in this map.
                self._connections = {k: v for k, v in self._connections.items() if len(v)}
                self._prune_at = max(1024, 2 * len(self._connections))
            conns = self._connections[requestor] = weakref.WeakSet()
        conns.add(conn)

    def watch_end(self, requestor: str, conn: Connection | None) -> None:
        """Once per connection that starts tasks: cancel them when its session ends."""
        if conn is None or not self.cancel_on_session_end or not session_bound(requestor):
            return
        if not conn.state.get(_WATCHED_KEY):
            conn.state[_WATCHED_KEY] = True
            on_connection_close(conn).push_async_callback(self._session_ended, requestor)

    async def _session_ended(self, requestor: str) -> None:
        try:
            count = await self.engine.cancel_requestor_tasks(requestor, SESSION_ENDED_MESSAGE)
        except Exception:
            log.exception("cancelling the tasks of an ended session failed")
            return
        if count:
            log.info("session ended: cancelled %d unfinished task(s)", count)

    # ------------------------------------------------------------------ notifications
    def _render(self, rec: TaskRecord) -> tuple[str, dict[str, Any]] | None:
        render: Callable[[TaskRecord], Any] | None = getattr(
            self.handlers.get(rec.face), "status_notification", None
        )
        return render(rec) if render is not None else None

    async def on_status(self, rec: TaskRecord) -> None:
        """A status change, to the requestor's connections (see the module's docstring)."""
        conns = self._connections.get(rec.requestor)
        if not conns:
            return
        server = self.server
        if not any(standalone_delivers(server, conn) for conn in conns):
            return  # no GET stream open to any of them: nothing to render
        note = self._render(rec)
        if note is None:
            return
        method, params = note
        for conn in list(conns):
            if not standalone_delivers(self.server, conn):
                continue  # an HTTP session with no GET stream: the SDK would drop it
            waiting = self._notifying.get(conn, 0)
            if waiting >= NOTIFY_BACKLOG:
                self.notifications_dropped += 1
                continue
            self._notifying[conn] = waiting + 1
            try:
                with anyio.move_on_after(5):
                    await conn.notify(method, dict(params))
            finally:
                self._notifying[conn] -= 1


_SESSION_HEADER: Final = MCP_SESSION_ID_HEADER.lower().encode()


class SessionQuota:
    """ASGI app in front of the SDK's Streamable HTTP endpoint: at most ``per_requestor``
    open sessions per requestor (the bearer token's subject, else the client's address),
    under the SDK's own global ``max_sessions`` (R-SEC-4). A request that would open one
    more answers HTTP 429 with a JSON-RPC ``SessionLimitExceeded``; the requestor's sessions
    as they end or idle out make room again, and other requestors are never refused for it.

    A session counts from its opening request (a ``POST`` without ``Mcp-Session-Id``) until
    the SDK's session manager no longer holds it."""

    def __init__(self, app: Any, manager: Any, per_requestor: int) -> None:
        if isinstance(per_requestor, bool) or not isinstance(per_requestor, int):
            raise TypeError("max_sessions_per_requestor must be an int")
        if per_requestor < 1:
            raise ValueError(f"max_sessions_per_requestor must be >= 1, not {per_requestor}")
        self.app = app
        self.manager = manager
        self.per_requestor = per_requestor
        #: requestor -> ids of the sessions it opened (pruned as they end)
        self._open: dict[str, set[str]] = {}
        #: requestor -> opening requests in flight
        self._opening: dict[str, int] = {}
        #: how many requests it refused
        self.refused = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app, name)

    def open_sessions(self, key: str) -> int:
        """The live sessions ``key`` opened (ended ones forgotten now)."""
        ids = self._open.get(key)
        if ids is None:
            return 0
        manager = self.manager
        for sid in [s for s in ids if not live_session(manager, s)]:
            ids.discard(sid)
        if not ids:
            del self._open[key]
        return len(ids)

    def _prune(self) -> None:
        for key in list(self._open):
            self.open_sessions(key)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if (
            scope.get("type") != "http"
            or scope.get("method") != "POST"
            or self.manager.stateless
            or any(k == _SESSION_HEADER for k, _ in scope.get("headers", ()))
        ):
            await self.app(scope, receive, send)
            return
        subject = current_subject()
        key = f"subject:{subject}" if subject is not None else f"address:{client_address(scope)}"
        if self.open_sessions(key) + self._opening.get(key, 0) >= self.per_requestor:
            self.refused += 1
            await _refuse(send, SessionLimitExceeded(self.per_requestor))
            return
        if len(self._open) > 1024 and len(self._open) > 2 * session_count(self.manager):
            self._prune()
        self._opening[key] = self._opening.get(key, 0) + 1
        opening = True

        def opened() -> None:
            """No longer an opening request: its session (if any) counts among the open."""
            nonlocal opening
            if not opening:
                return
            opening = False
            left = self._opening[key] - 1
            if left:
                self._opening[key] = left
            else:
                del self._opening[key]

        async def noting(message: Any) -> None:
            if message["type"] == "http.response.start":
                for name, value in message.get("headers", ()):
                    if name.lower() == _SESSION_HEADER:
                        self._open.setdefault(key, set()).add(value.decode("latin-1"))
                        # once, not twice: the client may open the next session before
                        # this request's handler returns
                        opened()
            await send(message)

        try:
            await self.app(scope, receive, noting)
        finally:
            opened()


async def _refuse(send: Any, error: Any) -> None:
    body = pydantic_core.to_json({"jsonrpc": "2.0", "id": None, "error": error.to_error()})
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 429, "headers": headers})
    await send({"type": "http.response.body", "body": body})
