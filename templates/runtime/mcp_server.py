"""Serve 2025-11-25 tasks from an ``mcp`` (2.3.x) server: one object, :class:`McpTasks`.

    server = Server("demo", on_list_tools=..., on_call_tool=...)   # or MCPServer("demo")
    tasks = McpTasks(server, task_support={"slow": "optional"})
    async with tasks:                                               # runs the task engine
        ...serve server over stdio or Streamable HTTP...

What it does to the server (all through ``Server.middleware`` and
``Server.add_request_handler``):

- ``initialize``: adds ``capabilities.tasks`` built by the generated negotiator
  (R-CAP-1, R-CAP-2) on 2025-11-25 sessions; ``tasks.list`` only when the
  requestor has an identity, unless ``list_without_identity`` (R-SEC-2).
- ``tools/list``: stamps ``execution.taskSupport`` on the tools it knows.
- ``tools/call``: enforces ``taskSupport`` with ``-32601`` (R-TOOL-2, R-TOOL-4);
  a task-augmented call answers ``CreateTaskResult`` at once (R-CREATE-2) and
  the SDK's own pipeline (validation, the tool, its result checks) runs in the
  background inside the engine. The tool's ``ctx.session`` there is a
  task-scoped session: progress goes to the original ``progressToken``
  (R-PROGRESS-1), elicitation/sampling requests move the task to
  ``input_required`` and are delivered on the ``tasks/result`` stream (R-INPUT-*).
- ``tasks/get|result|list|cancel`` are served by the engine; status changes are
  sent as ``notifications/tasks/status`` to the requestor's connections (R-NOTIFY-1).
- Any ``ValidationError`` becomes ``-32602`` naming the field; any
  :class:`TaskError` becomes its JSON-RPC error.

Requestor identity (R-SEC-1): the bearer token's subject when the SDK's auth
hooks provide one, else the transport session (Mcp-Session-Id, or the stdio
connection); stateless HTTP without auth has none (everything is "anonymous").

SDK private attributes used: ``ServerSession._connection`` (the stable
per-connection object; no public accessor) and ``ServerSession._request_outbound``
(the request-scoped channel of a ``tasks/result`` call); ``MCPServer._lowlevel_server``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import secrets
import weakref
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

import anyio
import mcp_types as types
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ConfigDict, ValidationError

from ..capabilities import build_tasks_capability, check_tool_call, peer_supports
from ..errors import InternalError, JsonRpcError, TaskError
from ..handlers import RequestContext
from ..meta import MODEL_IMMEDIATE_RESPONSE_KEY, RELATED_TASK_KEY
from ..store import TaskStore
from .engine import EngineConfig, PendingInput, TaskContext, TaskEngine

__all__ = [
    "PROTOCOL_VERSION",
    "McpTasks",
    "add_tasks",
    "error_from_validation",
    "malformed_answer",
    "request_client_task",
    "run_stdio",
    "tidy_http_errors",
]

log = logging.getLogger(__name__)

PROTOCOL_VERSION = "2025-11-25"
TERMINAL = frozenset({"completed", "failed", "cancelled"})
TaskSupportValue = Literal["forbidden", "optional", "required"]
INPUT_METHODS = frozenset({"elicitation/create", "sampling/createMessage", "roots/list"})
_REQUESTOR_KEY = "mcp_tasks.requestor"


class _RawParams(BaseModel):
    """Accept any params; the engine validates them and names the bad field."""

    model_config = ConfigDict(extra="allow")


def error_from_validation(exc: ValidationError, prefix: str = "") -> MCPError:
    """``-32602`` naming the first bad field (never ``-32603`` nor a traceback)."""
    errs = exc.errors()
    if not errs:
        return MCPError(types.INVALID_PARAMS, "Invalid params")
    err = errs[0]
    loc = [str(p) for p in err.get("loc", ())]
    if loc and loc[0] == "params":
        loc = loc[1:]
    field = ".".join([prefix, *loc] if prefix else loc) or "params"
    return MCPError(
        types.INVALID_PARAMS,
        f"Invalid params: {field}: {err.get('msg', 'invalid')}",
        {"field": field},
    )


def _mcp_error(exc: TaskError) -> MCPError:
    return MCPError(exc.code, exc.message, exc.data)


def _task_error(exc: MCPError) -> JsonRpcError:
    return JsonRpcError(exc.code, exc.message, exc.data)


def _lowlevel(server: Any) -> Server[Any]:
    if isinstance(server, Server):
        return server
    inner = getattr(server, "_lowlevel_server", None)  # MCPServer (private attribute)
    if isinstance(inner, Server):
        return inner
    raise TypeError(f"expected mcp Server or MCPServer, got {type(server).__name__}")


def connection_of(session: ServerSession) -> Connection:
    """The stable per-connection object behind a per-request ``ServerSession`` (private attr)."""
    conn = session._connection
    return conn


def _subject() -> str | None:
    try:
        from mcp.server.auth.middleware.auth_context import get_access_token
    except ImportError:  # pragma: no cover - auth extras missing
        return None
    token = get_access_token()
    if token is None:
        return None
    return token.subject or token.client_id or None


class _TaskOutbound:
    """Duck-types ``mcp.shared.dispatcher.DispatchContext`` for the tool running in a task.

    Requests (elicitation, sampling) become the task's pending input (R-INPUT-1..4);
    notifications go to the connection's standalone channel with related-task
    ``_meta`` (R-META-1); progress keeps the original token (R-PROGRESS-1).
    """

    def __init__(
        self,
        conn: Connection,
        tctx: TaskContext,
        progress_token: str | int | None,
        request_id: Any,
    ) -> None:
        self.conn = conn
        self.tctx = tctx
        self.progress_token = progress_token
        self.request_id = request_id
        self.message_metadata: Any = None
        self._cancel_requested: anyio.Event | None = None

    @property
    def cancel_requested(self) -> anyio.Event:
        # Made on first use: an anyio.Event per task is measurable (benchmarks/peers).
        ev = self._cancel_requested
        if ev is None:
            ev = self._cancel_requested = anyio.Event()
        return ev

    @property
    def transport(self) -> Any:
        return None

    @property
    def can_send_request(self) -> bool:
        return True  # answered through tasks/result, whatever the transport

    def _stamp(self, params: Mapping[str, Any] | None) -> dict[str, Any]:
        out = dict(params or {})
        meta = dict(out.get("_meta") or {})
        meta[RELATED_TASK_KEY] = {"taskId": self.tctx.task_id}
        out["_meta"] = meta
        return out

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: Any = None
    ) -> dict[str, Any]:
        if method in INPUT_METHODS:
            try:
                return await self.tctx.request_input(method, self._stamp(params))
            except TaskError as exc:
                raise _mcp_error(exc) from None
        return await self.conn.send_raw_request(method, self._stamp(params), opts)

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: Any = None) -> None:
        if method == "notifications/progress":
            await self.conn.notify(method, params, opts)
        else:
            await self.conn.notify(method, self._stamp(params), opts)

    async def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        if self.progress_token is None:
            return
        params: dict[str, Any] = {"progressToken": self.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self.conn.notify("notifications/progress", params)


class McpTasks:
    """Adds 2025-11-25 tasks to an ``mcp`` ``Server`` (or ``MCPServer``).

    ``task_support``: tool name -> ``"forbidden" | "optional" | "required"``
    (tools not listed are ``forbidden``: R-TOOL-2). ``list_without_identity``:
    declare ``tasks.list`` even when requestors cannot be told apart (R-SEC-2).
    ``immediate_response``: the ``model-immediate-response`` text (R-CREATE-3).
    Use ``async with tasks:`` around serving; it runs the engine's sweeper.
    """

    def __init__(
        self,
        server: Any,
        *,
        store: TaskStore | None = None,
        config: EngineConfig | None = None,
        task_support: Mapping[str, TaskSupportValue] | None = None,
        list_without_identity: bool = False,
        immediate_response: str | None = None,
    ) -> None:
        self.server = _lowlevel(server)
        self.engine = TaskEngine(store, config, on_status=self._on_status)
        self.task_support: dict[str, str] = dict(task_support or {})
        self.list_without_identity = list_without_identity
        self.immediate_response = immediate_response
        self._connections: dict[str, weakref.WeakSet[Connection]] = {}
        self._prune_at = 1024
        self.server.middleware.append(self._middleware)
        for method in ("tasks/get", "tasks/result", "tasks/list", "tasks/cancel"):
            self.server.add_request_handler(method, _RawParams, self._make_handler(method))

    # ------------------------------------------------------------------ lifecycle
    async def __aenter__(self) -> McpTasks:
        await self.engine.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.engine.__aexit__(*exc)

    def tool(self, name: str, task_support: TaskSupportValue = "optional") -> None:
        """Mark a tool's ``execution.taskSupport``."""
        self.task_support[name] = task_support

    # ------------------------------------------------------------------ identity
    def requestor_of(self, ctx: ServerRequestContext[Any, Any]) -> tuple[str, bool]:
        """(requestor key, whether it really identifies someone) for R-SEC-1."""
        subject = _subject()
        if subject is not None:
            return f"subject:{subject}", True
        conn = connection_of(ctx.session)
        if conn.session_id is not None:
            return f"session:{conn.session_id}", True
        if ctx.request is None:  # stdio: one connection, one requestor
            key = conn.state.get(_REQUESTOR_KEY)
            if key is None:
                key = conn.state[_REQUESTOR_KEY] = f"stdio:{secrets.token_hex(16)}"
            return str(key), True
        return "anonymous", False  # stateless HTTP without auth (R-SEC-2)

    def _context(self, ctx: ServerRequestContext[Any, Any], requestor: str) -> RequestContext:
        meta = ctx.params.get("_meta") if isinstance(ctx.params, Mapping) else None
        token = meta.get("progressToken") if isinstance(meta, Mapping) else None
        return RequestContext(
            requestor=requestor,
            request_id=ctx.request_id,
            progress_token=token if isinstance(token, (str, int)) else None,
            meta=meta if isinstance(meta, Mapping) else None,
        )

    def _remember(self, requestor: str, conn: Connection) -> None:
        conns = self._connections.get(requestor)
        if conns is None:
            if len(self._connections) >= self._prune_at:
                # Requestors whose connections are all gone: drop them (amortised O(1)),
                # else every session ever seen would stay in this map.
                self._connections = {k: v for k, v in self._connections.items() if len(v)}
                self._prune_at = max(1024, 2 * len(self._connections))
            conns = self._connections[requestor] = weakref.WeakSet()
        conns.add(conn)

    async def _on_status(self, requestor: str, task: dict[str, Any]) -> None:
        """R-NOTIFY-1: the whole Task, no related-task ``_meta`` (R-NOTIFY-3)."""
        for conn in list(self._connections.get(requestor, ())):
            with anyio.move_on_after(5):
                await conn.notify("notifications/tasks/status", dict(task))

    # ------------------------------------------------------------------ middleware
    async def _middleware(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if ctx.request_id is None:  # notifications pass untouched
            return await call_next(ctx)
        try:
            if ctx.method == "tools/call":
                return await self._tools_call(ctx, call_next)
            result = await call_next(ctx)
            if ctx.method == "initialize":
                self._patch_initialize(ctx, result)
            elif ctx.method == "tools/list":
                self._patch_tools_list(ctx, result)
            return result
        except ValidationError as exc:
            raise error_from_validation(exc) from None
        except TaskError as exc:
            raise _mcp_error(exc) from None

    def _patch_initialize(self, ctx: ServerRequestContext[Any, Any], result: HandlerResult) -> None:
        if not isinstance(result, dict) or result.get("protocolVersion") != PROTOCOL_VERSION:
            return
        _, identified = self.requestor_of(ctx)
        caps = result.setdefault("capabilities", {})
        caps["tasks"] = build_tasks_capability(
            "server",
            requests=["tools/call"],
            list=identified or self.list_without_identity,
            cancel=True,
        )

    def _patch_tools_list(self, ctx: ServerRequestContext[Any, Any], result: HandlerResult) -> None:
        if not isinstance(result, dict) or ctx.protocol_version != PROTOCOL_VERSION:
            return
        for tool in result.get("tools", []):
            support = self.task_support.get(tool.get("name"))
            if support is not None and isinstance(tool, dict):
                execution = dict(tool.get("execution") or {})
                execution["taskSupport"] = support
                tool["execution"] = execution

    async def _tools_call(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        raw = dict(ctx.params or {})
        try:
            parsed = types.CallToolRequestParams.model_validate(raw)
        except ValidationError as exc:
            raise error_from_validation(exc) from None
        augmented = "task" in raw and raw["task"] is not None
        name = parsed.name
        declared = connection_of(ctx.session).protocol_version == PROTOCOL_VERSION
        support = self.task_support.get(name)
        if support is None and not augmented:
            return await call_next(ctx)  # a tool we do not manage: the SDK answers as usual
        as_task = check_tool_call(name, support, augmented=augmented, declared=declared)
        params = {k: v for k, v in raw.items() if k != "task"}
        if not as_task:
            return await call_next(dataclasses.replace(ctx, params=params))  # R-CREATE-4
        requestor, _ = self.requestor_of(ctx)
        conn = connection_of(ctx.session)
        self._remember(requestor, conn)
        rctx = self._context(ctx, requestor)
        request_id = ctx.request_id

        async def work(tctx: TaskContext) -> dict[str, Any]:
            outbound = _TaskOutbound(conn, tctx, rctx.progress_token, request_id)
            session = ServerSession(outbound, conn)
            try:
                result = await call_next(dataclasses.replace(ctx, params=params, session=session))
            except MCPError as exc:
                raise _task_error(exc) from None
            except ValidationError as exc:
                raise _task_error(error_from_validation(exc)) from None
            if isinstance(result, BaseModel):
                dumped: dict[str, Any] = result.model_dump(
                    by_alias=True, mode="json", exclude_none=True
                )
                return dumped
            return dict(result or {})

        created = await self.engine.create_task(
            rctx,
            "tools/call",
            work,
            task=raw.get("task") if isinstance(raw.get("task"), Mapping) else {},
            immediate_response=self.immediate_response,
        )
        if self.immediate_response is not None:
            meta = dict(created.get("_meta") or {})
            meta.setdefault(MODEL_IMMEDIATE_RESPONSE_KEY, self.immediate_response)
            created["_meta"] = meta
        return created

    # ------------------------------------------------------------------ tasks/*
    def _make_handler(
        self, method: str
    ) -> Callable[[ServerRequestContext[Any, Any], _RawParams], Awaitable[dict[str, Any]]]:
        async def handler(ctx: ServerRequestContext[Any, Any], _: _RawParams) -> dict[str, Any]:
            requestor, _identified = self.requestor_of(ctx)
            self._remember(requestor, connection_of(ctx.session))
            params = dict(ctx.params or {})
            on_input = self._input_sender(ctx) if method == "tasks/result" else None
            try:
                return await self.engine.handle(
                    method, params, self._context(ctx, requestor), on_input=on_input
                )
            except TaskError as exc:
                raise _mcp_error(exc) from None
            except MCPError:
                raise
            except Exception:
                log.exception("%s failed", method)
                raise _mcp_error(InternalError(detail=method)) from None

        return handler

    def _input_sender(
        self, ctx: ServerRequestContext[Any, Any]
    ) -> Callable[[PendingInput], Awaitable[dict[str, Any]]]:
        """R-INPUT-3: deliver a task's pending request on the ``tasks/result`` stream."""
        session = ctx.session
        conn = connection_of(session)

        async def send(pending: PendingInput) -> dict[str, Any]:
            try:
                if session.can_send_request:
                    request_outbound = session._request_outbound  # private: request-scoped channel
                    return await request_outbound.send_raw_request(pending.method, pending.params)
                return await conn.send_raw_request(pending.method, pending.params)
            except MCPError as exc:
                raise _task_error(exc) from None

        return send


def add_tasks(server: Any, **kwargs: Any) -> McpTasks:
    """One call: ``tasks = add_tasks(server, task_support={...})``; then ``async with tasks:``."""
    return McpTasks(server, **kwargs)


async def request_client_task(
    session: ServerSession,
    method: str,
    params: Mapping[str, Any],
    *,
    ttl: int | None = 60_000,
    default_poll_ms: int = 500,
    on_status: Callable[[dict[str, Any]], Awaitable[None]] | None = None,
) -> dict[str, Any]:
    """Server as requestor: send ``sampling/createMessage`` or ``elicitation/create`` to the
    client as a task when it declared ``tasks.requests.<method>`` (R-CAP-3), poll
    ``tasks/get`` honouring ``pollInterval`` (R-GET-1, R-GET-2), then fetch ``tasks/result``
    (R-RESULT-1). Without the capability, sends the plain request (R-CREATE-4)."""
    conn = connection_of(session)
    if not peer_supports(conn.client_capabilities, method):
        return await conn.send_raw_request(method, dict(params))
    body = dict(params)
    body["task"] = {} if ttl is None else {"ttl": ttl}
    created = await conn.send_raw_request(method, body)
    task = created.get("task")
    if not isinstance(task, Mapping):
        return created  # the client answered at once (it ignored `task`)
    task_id = str(task["taskId"])
    current: Mapping[str, Any] = task
    while current.get("status") not in TERMINAL and current.get("status") != "input_required":
        interval = current.get("pollInterval")
        await anyio.sleep((interval if isinstance(interval, int) else default_poll_ms) / 1000)
        current = await conn.send_raw_request("tasks/get", {"taskId": task_id})
        if on_status is not None:
            await on_status(dict(current))
    return await conn.send_raw_request("tasks/result", {"taskId": task_id})


def malformed_answer(exc: Exception) -> types.JSONRPCError:
    """The JSON-RPC 2.0 answer to a line the transport could not read as a message:
    ``-32700`` for bad JSON, else ``-32600`` (id echoed when one can be read). Short
    messages only: the validator's report stays in the server."""
    errors: list[Any] = []
    if isinstance(exc, ValidationError):
        errors = list(exc.errors(include_url=False))
    if not errors or any(e.get("type") == "json_invalid" for e in errors):
        return types.JSONRPCError(
            jsonrpc="2.0",
            id=None,
            error=types.ErrorData(code=types.PARSE_ERROR, message="Parse error: not valid JSON"),
        )
    request_id: str | int | None = None
    for e in errors:
        value = e.get("input")
        if isinstance(value, Mapping):
            rid = value.get("id")
            if isinstance(rid, (str, int)) and not isinstance(rid, bool):
                request_id = rid
                break
    return types.JSONRPCError(
        jsonrpc="2.0",
        id=request_id,
        error=types.ErrorData(
            code=types.INVALID_REQUEST,
            message="Invalid Request: not a JSON-RPC 2.0 request, notification or response",
        ),
    )


async def run_stdio(server: Any) -> None:
    """Serve ``server`` (``Server`` or ``MCPServer``) over stdio, like ``run_stdio_async``,
    but answer lines that are not JSON-RPC messages (:func:`malformed_answer`) instead of
    dropping them: the SDK's stdio transport drops them silently, and a client whose
    request had an id would wait forever."""
    from mcp.server.stdio import stdio_server
    from mcp.shared._context_streams import create_context_streams
    from mcp.shared.message import SessionMessage

    low = _lowlevel(server)
    async with stdio_server() as (read_stream, write_stream):
        relay_send, relay_receive = create_context_streams[SessionMessage | Exception](0)

        async def relay() -> None:
            async with relay_send:
                async for item in read_stream:
                    if isinstance(item, Exception):
                        await write_stream.send(SessionMessage(malformed_answer(item)))
                    else:
                        await relay_send.send(item)

        async with anyio.create_task_group() as tg:
            tg.start_soon(relay)
            await low.run(relay_receive, write_stream, low.create_initialization_options())
            tg.cancel_scope.cancel()


_INVALID_REQUEST = {
    "code": types.INVALID_REQUEST,
    "message": "Invalid Request: not a JSON-RPC 2.0 request, notification or response",
}


def _tidy_error_body(body: bytes) -> bytes | None:
    """A short ``-32600`` instead of the SDK's multi-line validator report, else ``None``."""
    try:
        doc = json.loads(body)
    except ValueError:
        return None
    err = doc.get("error") if isinstance(doc, dict) else None
    if not isinstance(err, dict) or not str(err.get("message", "")).startswith("Validation error"):
        return None
    doc["error"] = dict(_INVALID_REQUEST)
    return json.dumps(doc, separators=(",", ":")).encode()


def tidy_http_errors(app: Any) -> Any:
    """Wrap the SDK's Streamable HTTP ASGI app: an invalid JSON-RPC envelope answers 400 with
    ``-32600`` and one short line, not ``-32602`` with pydantic's full report (which names
    library versions and internals)."""

    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") != "http" or scope.get("method") != "POST":
            await app(scope, receive, send)
            return
        held: dict[str, Any] | None = None
        chunks: list[bytes] = []

        async def send_tidy(message: Any) -> None:
            nonlocal held
            if message["type"] == "http.response.start" and message.get("status") == 400:
                held = message
                return
            if held is None or message["type"] != "http.response.body":
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body"):
                return
            start, held = held, None
            body = b"".join(chunks)
            tidy = _tidy_error_body(body)
            if tidy is not None:
                headers = [
                    (k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"
                ]
                start = {
                    **start,
                    "headers": [*headers, (b"content-length", str(len(tidy)).encode())],
                }
                body = tidy
            await send(start)
            await send({"type": "http.response.body", "body": body})

        await app(scope, receive, send_tidy)

    return wrapped
