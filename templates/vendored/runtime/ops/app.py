"""``OpsApp``: the operator surfaces of a task server as one ASGI app, to serve on a
listener of its own (the example server's ``--ops HOST:PORT``) or to mount into yours
(``Mount("/ops", app=OpsApp(tasks, ...))``). Every path is relative to where it is served.

- ``GET /healthz``: liveness (200 while the process serves); ``GET /readyz``: readiness,
  200 when the task store answers within 2 s, else 503. No token (probes carry none), and
  they tell nothing of the tasks. Off with ``health=False``.
- ``GET /metrics``: the Prometheus text format (``metrics.TaskMetrics``), only when a
  ``metrics_token`` is given, and only with it (``Authorization: Bearer TOKEN``).
- ``/admin/``: the dashboard, a page of its own files (no build step, nothing fetched from
  elsewhere); its API under ``/admin/api/`` (``tasks``, ``tasks/ID``, ``POST
  tasks/ID/cancel``, ``summary``, ``events``: server-sent events) only when an
  ``admin_token`` is given, and only with it. The page itself holds no data: it asks for
  the token and sends it on every call.

A surface that is off answers 404, as a path that does not exist. The tokens are the
operators' own: at least 16 characters, different from each other; the example server also
refuses one that is a requestor's bearer token. Nothing here changes what the MCP endpoint
answers: this app serves none of its paths.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import urllib.parse
from collections.abc import Awaitable, Callable, MutableMapping
from importlib import resources
from typing import Any

import anyio

from ...errors import TaskError
from ..engine.task_engine import TaskEngine
from ..logs import logger
from .feed import TaskFeed
from .metrics import CONTENT_TYPE, TaskMetrics
from .service import AdminService
from .views import QueryError, first, query_of

__all__ = ["MIN_TOKEN_LENGTH", "OpsApp"]

log = logger("runtime")

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

MIN_TOKEN_LENGTH = 16
#: how long readiness waits for the store
READY_TIMEOUT_S = 2.0
#: a comment line on an idle event stream this often (proxies keep it open)
PING_S = 15.0
#: the ID readiness looks up (no task has it: IDs are 128 random bits)
PROBE_ID = "readiness-probe"
_STATIC = {
    "": ("dashboard.html", "text/html; charset=utf-8"),
    "app.js": ("app.js", "text/javascript; charset=utf-8"),
    "app.css": ("app.css", "text/css; charset=utf-8"),
}
_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_COMMON = [
    (b"cache-control", b"no-store"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def _check_token(name: str, token: str | None) -> bytes | None:
    if token is None:
        return None
    if not isinstance(token, str) or len(token.strip()) < MIN_TOKEN_LENGTH:
        raise ValueError(f"{name}: at least {MIN_TOKEN_LENGTH} characters (a guessable token)")
    return _digest(token.strip())


class OpsApp:
    """Health, metrics and the dashboard of ``target`` (an ``McpTasks`` or a ``TaskEngine``);
    see the module's docstring. ``close()`` when done (it stops counting)."""

    def __init__(
        self,
        target: Any,
        *,
        metrics_token: str | None = None,
        admin_token: str | None = None,
        health: bool = True,
        metrics: TaskMetrics | None = None,
    ) -> None:
        self.engine: TaskEngine = target if isinstance(target, TaskEngine) else target.engine
        self._metrics_key = _check_token("metrics_token", metrics_token)
        self._admin_key = _check_token("admin_token", admin_token)
        if self._metrics_key is not None and self._metrics_key == self._admin_key:
            raise ValueError("metrics_token and admin_token must differ")
        self.health = health
        self.metrics: TaskMetrics | None = None
        if self._metrics_key is not None:
            self.metrics = metrics if metrics is not None else TaskMetrics()
            if isinstance(target, TaskEngine):
                self.metrics.attach(target)
            else:
                self.metrics.attach_server(target)
        self.service: AdminService | None = None
        self.feed: TaskFeed | None = None
        if self._admin_key is not None:
            self.service = AdminService(self.engine)
            self.feed = TaskFeed(self.engine)
        self._closed = False
        self._files: dict[str, bytes] = {}

    def close(self) -> None:
        self._closed = True
        if self.metrics is not None:
            self.metrics.close()
        if self.feed is not None:
            self.feed.close()

    # ------------------------------------------------------------------ ASGI
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path = scope.get("path", "")
        root = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root) :]
        method = scope.get("method", "GET")
        try:
            await self._route(scope, receive, send, path.lstrip("/"), method)
        except QueryError as exc:
            await _json(send, 400, {"error": str(exc)})

    async def _route(
        self, scope: Scope, receive: Receive, send: Send, path: str, method: str
    ) -> None:
        if path in ("healthz", "readyz") and self.health:
            if not _allowed(method, "GET", "HEAD"):
                return await _json(send, 405, {"error": "method not allowed"})
            if path == "healthz":
                return await _json(send, 200, {"status": "ok"})
            return await self._ready(send)
        if path == "metrics" and self._metrics_key is not None:
            if not self._authorized(scope, self._metrics_key):
                return await _unauthorized(send)
            assert self.metrics is not None
            body = self.metrics.render()
            return await _reply(send, 200, body, CONTENT_TYPE.encode())
        if self._admin_key is None or not (path == "admin" or path.startswith("admin/")):
            return await _json(send, 404, {"error": "not found"})
        if path == "admin":
            return await _redirect(send, "admin/")
        sub = path[len("admin/") :]
        if sub in _STATIC:
            return await self._static(send, sub)
        if not sub.startswith("api/"):
            return await _json(send, 404, {"error": "not found"})
        if not self._authorized(scope, self._admin_key):
            return await _unauthorized(send)
        await self._api(scope, receive, send, sub[len("api/") :], method)

    def _authorized(self, scope: Scope, key: bytes) -> bool:
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                scheme, _, token = value.decode("latin-1").partition(" ")
                if scheme.lower() == "bearer" and token.strip():
                    return hmac.compare_digest(_digest(token.strip()), key)
        return False

    async def _ready(self, send: Send) -> None:
        try:
            with anyio.fail_after(READY_TIMEOUT_S):
                await self.engine.guard.get(PROBE_ID)
        except TimeoutError:
            return await _json(send, 503, {"status": "unavailable", "store": "timeout"})
        except TaskError as exc:
            return await _json(send, 503, {"status": "unavailable", "store": exc.message})
        await _json(send, 200, {"status": "ready", "store": "ok"})

    async def _static(self, send: Send, name: str) -> None:
        file, ctype = _STATIC[name]
        body = self._files.get(file)
        if body is None:
            body = self._files[file] = (
                resources.files(__package__).joinpath("static", file).read_bytes()
            )
        extra = [(b"content-security-policy", _CSP.encode())] if name == "" else []
        await _reply(send, 200, body, ctype.encode(), extra)

    # ------------------------------------------------------------------ the admin API
    async def _api(
        self, scope: Scope, receive: Receive, send: Send, path: str, method: str
    ) -> None:
        service = self.service
        assert service is not None
        params = urllib.parse.parse_qs(scope.get("query_string", b"").decode("latin-1"))
        parts = path.split("/")
        try:
            if path in ("tasks", "summary") and _allowed(method, "GET"):
                query = query_of(
                    self.engine.clock(),
                    statuses=params.get("status", []),
                    requestor=first(params, "requestor"),
                    tool=first(params, "tool"),
                    newer_than=first(params, "newer_than"),
                    older_than=first(params, "older_than"),
                )
                if path == "summary":
                    return await _json(send, 200, await service.summary(query))
                limit = _int(first(params, "limit"))
                page = await service.list(query, first(params, "cursor"), limit)
                return await _json(send, 200, page)
            if path == "events" and _allowed(method, "GET"):
                return await self._events(receive, send)
            if len(parts) == 2 and parts[0] == "tasks" and _allowed(method, "GET"):
                task = await service.show(urllib.parse.unquote(parts[1]))
                if task is None:
                    return await _json(send, 404, {"error": "no such task"})
                return await _json(send, 200, task)
            if len(parts) == 3 and parts[0] == "tasks" and parts[2] == "cancel":
                if not _allowed(method, "POST"):
                    return await _json(send, 405, {"error": "POST to cancel"})
                out = await service.cancel(urllib.parse.unquote(parts[1]))
                status = 404 if out["task"] is None else 200
                return await _json(send, status, out)
        except NotImplementedError as exc:
            return await _json(send, 501, {"error": str(exc)})
        except TaskError as exc:
            return await _json(send, 503, {"error": exc.message})
        await _json(send, 404, {"error": "not found"})

    async def _events(self, receive: Receive, send: Send) -> None:
        feed = self.feed
        assert feed is not None
        headers = [(b"content-type", b"text/event-stream; charset=utf-8"), *_COMMON]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        async with feed.subscribe() as sub, anyio.create_task_group() as tg:

            async def until_gone() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                tg.cancel_scope.cancel()

            tg.start_soon(until_gone)
            chunk = b'retry: 2000\nevent: hello\ndata: {"kind":"hello"}\n\n'
            while not self._closed:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                chunk = b": ping\n\n"
                with anyio.move_on_after(PING_S):
                    events = await sub.next()
                    chunk = b"".join(
                        f"event: {e['kind']}\ndata: {json.dumps(e)}\n\n".encode() for e in events
                    )
            tg.cancel_scope.cancel()
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def _allowed(method: str, *methods: str) -> bool:
    return method in methods


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        raise QueryError(f"limit: a whole number, not {text!r}") from None


async def _reply(
    send: Send,
    status: int,
    body: bytes,
    ctype: bytes,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    headers = [(b"content-type", ctype), (b"content-length", str(len(body)).encode()), *_COMMON]
    await send(
        {"type": "http.response.start", "status": status, "headers": headers + (extra or [])}
    )
    await send({"type": "http.response.body", "body": body})


async def _json(send: Send, status: int, data: Any) -> None:
    body = json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()
    await _reply(send, status, body, b"application/json")


async def _unauthorized(send: Send) -> None:
    body = b'{"error":"unauthorized: this needs its own bearer token"}'
    extra = [(b"www-authenticate", b'Bearer realm="mcp-tasks-ops"')]
    await _reply(send, 401, body, b"application/json", extra)


async def _redirect(send: Send, location: str) -> None:
    await _reply(send, 308, b"", b"text/plain", [(b"location", location.encode())])


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
