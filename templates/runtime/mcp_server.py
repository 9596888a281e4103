"""Serve tasks from an ``mcp`` (2.3.x) server: one object, :class:`McpTasks`.

    server = Server("demo", on_list_tools=..., on_call_tool=...)   # or MCPServer("demo")
    tasks = McpTasks(server, task_support={"slow": TASK_SUPPORT_OPTIONAL})
    async with tasks:                                               # runs the task engine
        ...serve server over stdio or Streamable HTTP...

What it does to the server (all through ``Server.middleware`` and
``Server.add_request_handler``):

- ``initialize``: adds ``capabilities.tasks`` built by the generated negotiator
  (R-CAP-1, R-CAP-2) on sessions of this revision; ``tasks.list`` only when the
  requestor has an identity, unless ``list_without_identity`` (R-SEC-2).
- ``tools/list``: stamps ``execution.taskSupport`` on the tools it knows.
- ``tools/call``: enforces ``taskSupport`` with ``-32601`` (R-TOOL-2, R-TOOL-4);
  a task-augmented call answers ``CreateTaskResult`` at once (R-CREATE-2) and
  the SDK's own pipeline (validation, the tool, its result checks) runs in the
  background inside the engine. The tool's ``ctx.session`` there is a
  task-scoped session (:class:`~.mcp_outbound.TaskOutbound`): progress goes to the
  original ``progressToken`` (R-PROGRESS-1), elicitation/sampling requests move the
  task to ``input_required`` and are delivered on the ``tasks/result`` stream (R-INPUT-*).
- ``tasks/get|result|list|cancel`` are served by the engine; status changes are
  sent as ``notifications/tasks/status`` to the requestor's connections (R-NOTIFY-1).
- A ``ValidationError`` becomes ``-32602`` naming the field; a :class:`TaskError`
  its own JSON-RPC error; any other exception a plain ``-32603 Internal error``
  (the traceback goes to the server log). All through the bridge in ``_sdk``.

Requestor identity (R-SEC-1): the bearer token's subject when the SDK's auth
hooks provide one, else the transport session (Mcp-Session-Id, or the stdio
connection); stateless HTTP without auth has none (everything is "anonymous").
Tasks bound to a session are cancelled when the session ends (stdio EOF, HTTP
``DELETE`` or termination) unless ``cancel_on_session_end=False``: nobody could
reach them afterwards. Tasks bound to a subject are kept for a reconnecting client.

Private SDK attributes are reached only through ``_sdk``.
"""

from __future__ import annotations

import contextvars
import dataclasses
import importlib
import logging
import secrets
import weakref
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

import anyio
import mcp_types as types
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ConfigDict, ValidationError

from ..capabilities import build_tasks_capability, check_tool_call
from ..errors import MethodNotFound, TaskError
from ..handlers import RequestContext
from ..meta import MODEL_IMMEDIATE_RESPONSE_KEY
from ..protocol import (
    AUGMENTABLE,
    NOTIFICATIONS_TASKS_STATUS,
    REVISION,
    TASK_REQUEST_METHODS,
    TASK_SUPPORT_OPTIONAL,
    TASK_SUPPORT_VALUES,
    TASKS_RESULT,
    TOOLS_CALL,
    TaskSupportValue,
)
from ..store import TaskStore
from ._sdk import (
    connection_of,
    from_sdk_error,
    internal_error,
    lowlevel_server,
    method_of,
    on_connection_close,
    request_outbound,
    standalone_delivers,
    task_session,
    to_sdk_error,
    tool_call_params,
    validation_error,
)
from .engine import EngineConfig, PendingInput, TaskContext, TaskEngine
from .mcp_outbound import TaskOutbound, request_client_task
from .mcp_transport import malformed_answer, run_stdio, tidy_http_errors

__all__ = [
    "PROTOCOL_VERSION",
    "McpTasks",
    "TaskSupportValue",
    "add_tasks",
    "check_task_support",
    "connection_of",
    "malformed_answer",
    "request_client_task",
    "run_stdio",
    "tidy_http_errors",
]

log = logging.getLogger(__name__)

PROTOCOL_VERSION = REVISION
INITIALIZE = method_of(types.InitializeRequest)
TOOLS_LIST = method_of(types.ListToolsRequest)
_REQUESTOR_KEY = "mcp_tasks.requestor"
_WATCHED_KEY = "mcp_tasks.session_end_watched"
_SESSION_PREFIXES = ("session:", "stdio:")
#: The requestor of every request that identifies nobody (stateless HTTP without auth).
ANONYMOUS = "anonymous"
#: status notifications that may wait per connection before more are dropped (R-NOTIFY-2)
NOTIFY_BACKLOG = 8  # requestors bound to one transport session
_F = TypeVar("_F", bound=Callable[..., Any])
#: A tool run inside a task: ``run(task-scoped dctx, tools/call params)``.
RunTool = Callable[[Any, dict[str, Any]], Awaitable[HandlerResult]]
#: Set while the SDK's pipeline runs a task's tool (the lean path): the middleware lets it by.
IN_TASK: contextvars.ContextVar[bool] = contextvars.ContextVar("mcp_tasks_in_task", default=False)


class _RawParams(BaseModel):
    """Accept any params; the engine validates them and names the bad field."""

    model_config = ConfigDict(extra="allow")


def _extension(tasks: McpTasks) -> Any:
    """The extension face's ``ExtensionServing`` for ``tasks``; None when the package was
    generated without the extension's schema (no ``extension`` bindings)."""
    try:
        module = importlib.import_module(f"{__package__}.mcp_extension")
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name.endswith(("extension", "mcp_extension")):
            return None
        raise
    return module.ExtensionServing(tasks)


def check_task_support(task_support: Mapping[str, object]) -> dict[str, TaskSupportValue]:
    """``task_support`` checked: every value one of the schema's ``taskSupport`` values
    (``ValueError`` naming the tool and the allowed values otherwise)."""
    out: dict[str, TaskSupportValue] = {}
    for name, value in task_support.items():
        if not isinstance(name, str) or value not in TASK_SUPPORT_VALUES:
            allowed = ", ".join(repr(v) for v in TASK_SUPPORT_VALUES)
            raise ValueError(f"task_support[{name!r}] = {value!r}: expected one of {allowed}")
        out[name] = value
    return out


def _subject() -> str | None:
    try:
        from mcp.server.auth.middleware.auth_context import get_access_token
    except ImportError:  # pragma: no cover - auth extras missing
        return None
    token = get_access_token()
    if token is None:
        return None
    return token.subject or token.client_id or None


def _wire(result: Any) -> dict[str, Any]:
    if isinstance(result, BaseModel):
        dumped: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        return dumped
    return dict(result or {})


class McpTasks:
    """Adds tasks to an ``mcp`` ``Server`` (or ``MCPServer``).

    ``task_support``: tool name -> one of ``TASK_SUPPORT_VALUES`` (tools not listed are
    ``forbidden``: R-TOOL-2); a bad value is refused here, a tool the server does not
    declare when the server starts (``async with tasks``). :meth:`tool` declares it
    beside ``@mcp.tool()``. ``list_without_identity``: declare ``tasks.list`` even when
    requestors cannot be told apart (R-SEC-2). ``immediate_response``: the
    ``model-immediate-response`` text (R-CREATE-3). ``cancel_on_session_end``: cancel a
    session-bound requestor's unfinished tasks when its session ends.
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
        cancel_on_session_end: bool = True,
    ) -> None:
        self._server_obj = server
        self.server = lowlevel_server(server)
        self.engine = TaskEngine(store, config, on_status=self._on_status)
        self.task_support: dict[str, TaskSupportValue] = check_task_support(task_support or {})
        self.list_without_identity = list_without_identity
        self.immediate_response = immediate_response
        self.cancel_on_session_end = cancel_on_session_end
        self._connections: dict[str, weakref.WeakSet[Connection]] = {}
        #: status notifications waiting to be handed to each connection, and those dropped
        self._notifying: weakref.WeakKeyDictionary[Connection, int] = weakref.WeakKeyDictionary()
        self.notifications_dropped = 0
        #: HTTP session id -> its connection (learnt at ``initialize``; for the lean path)
        self._sessions: weakref.WeakValueDictionary[str, Connection] = weakref.WeakValueDictionary()
        #: the lean path of the last :meth:`streamable_http_app` (None: not in use)
        self.lean: Any = None
        self._prune_at = 1024
        self._tools_checked = False
        self.server.middleware.append(self._middleware)
        #: The tasks extension's face (2026-07-28) when the package carries its bindings.
        self.extension: Any = _extension(self)
        methods = set(TASK_REQUEST_METHODS)
        if self.extension is not None:
            methods.update(self.extension.methods)
        for method in sorted(methods):
            self.server.add_request_handler(method, _RawParams, self._make_handler(method))

    # ------------------------------------------------------------------ lifecycle
    async def __aenter__(self) -> McpTasks:
        await self.check_tools()
        await self.engine.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.engine.__aexit__(*exc)

    def tool(
        self,
        name: str | None = None,
        task_support: TaskSupportValue = TASK_SUPPORT_OPTIONAL,
        *,
        gather_first: bool = False,
    ) -> Callable[[_F], _F]:
        """Declare a tool's ``execution.taskSupport``: ``tasks.tool("slow", TASK_SUPPORT_REQUIRED)``,
        or as a decorator beside ``@mcp.tool()`` (the function's name by default)::

            @tasks.tool(task_support=TASK_SUPPORT_REQUIRED)
            @mcp.tool()
            async def slow(...): ...

        One declaration serves both faces. ``gather_first``: on the tasks extension's face,
        a call without ``inputResponses`` runs inline so that the tool's SDK resolvers
        (``Elicit``) answer ``input_required`` before any task exists (X-MRTR-1).
        """

        def declare(key: str) -> None:
            self.task_support.update(check_task_support({key: task_support}))
            if gather_first and self.extension is not None:
                self.extension.gather_first.add(key)

        if name is not None:
            declare(name)

        def mark(fn: _F) -> _F:
            declare(name if name is not None else str(getattr(fn, "__name__", "")))
            return fn

        return mark

    async def check_tools(self) -> None:
        """Refuse ``task_support`` entries for tools the server does not declare
        (checked at start for an ``MCPServer``; for a low-level ``Server``, against its
        first ``tools/list`` answer)."""
        list_tools = getattr(self._server_obj, "list_tools", None)
        if list_tools is None or self._server_obj is self.server:
            return
        self._check_names(tool.name for tool in await list_tools())

    def _check_names(self, names: Iterable[str]) -> None:
        self._tools_checked = True
        known = set(names)
        unknown = sorted(set(self.task_support) - known)
        if unknown:
            raise ValueError(
                f"task_support names tools the server does not declare: {', '.join(unknown)}"
                f" (declared: {', '.join(sorted(known)) or 'none'})"
            )

    # ------------------------------------------------------------------ HTTP
    def streamable_http_app(self, *, lean: bool = True, **kwargs: Any) -> Any:
        """The server's Streamable HTTP app (its ``streamable_http_app(**kwargs)``) with the
        lean path (:mod:`.mcp_lean`) in front of the SDK's endpoint: the task methods are
        answered without the SDK's per-request machinery, every other request goes to the
        SDK unchanged. ``lean=False``: the SDK's app as it is."""
        app = self._server_obj.streamable_http_app(**kwargs)
        self.lean = None
        if lean:
            from .mcp_lean import install

            self.lean, app = install(self, app, kwargs.get("streamable_http_path", "/mcp"))
        return app

    def session_connection(self, session_id: str) -> Connection | None:
        """The connection of a live HTTP session that went through ``initialize`` here."""
        return self._sessions.get(session_id)

    def _note_session(self, conn: Connection) -> None:
        if conn.session_id is not None:
            self._sessions[conn.session_id] = conn

    def http_requestor(self, session_id: str | None) -> str:
        """The requestor key of an HTTP request being served (R-SEC-1): the bearer token's
        subject, else the session, else ``ANONYMOUS`` (stateless HTTP without auth)."""
        subject = _subject()
        if subject is not None:
            return f"subject:{subject}"
        return f"session:{session_id}" if session_id is not None else ANONYMOUS

    # ------------------------------------------------------------------ identity
    def requestor_of(self, ctx: ServerRequestContext[Any, Any]) -> tuple[str, bool]:
        """(requestor key, whether it really identifies someone) for R-SEC-1."""
        conn = connection_of(ctx.session)
        stdio = ctx.request is None and conn.session_id is None
        if stdio and _subject() is None:  # stdio: one connection, one requestor
            key = conn.state.get(_REQUESTOR_KEY)
            if key is None:
                key = conn.state[_REQUESTOR_KEY] = f"stdio:{secrets.token_hex(16)}"
            return str(key), True
        key = self.http_requestor(conn.session_id)
        return key, key != ANONYMOUS  # stateless HTTP without auth: none (R-SEC-2)

    def _context(self, ctx: ServerRequestContext[Any, Any], requestor: str) -> RequestContext:
        meta = ctx.params.get("_meta") if isinstance(ctx.params, Mapping) else None
        token = meta.get("progressToken") if isinstance(meta, Mapping) else None
        return RequestContext(
            requestor=requestor,
            request_id=ctx.request_id,
            progress_token=token if isinstance(token, (str, int)) else None,
            meta=meta if isinstance(meta, Mapping) else None,
        )

    def remember(self, requestor: str, conn: Connection) -> None:
        """Send ``requestor``'s status notifications to ``conn`` too (R-NOTIFY-1)."""
        if conn.session_id is None and not conn.state.get(_REQUESTOR_KEY):
            # Stateless HTTP: a connection per request, with no channel to the client after
            # it; a status notification sent there would go nowhere (and cost a send).
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

    def _watch_session_end(self, requestor: str, conn: Connection) -> None:
        """Once per connection that creates tasks: cancel them when its session ends."""
        if not self.cancel_on_session_end or not requestor.startswith(_SESSION_PREFIXES):
            return
        if not conn.state.get(_WATCHED_KEY):
            conn.state[_WATCHED_KEY] = True
            on_connection_close(conn).push_async_callback(self._session_ended, requestor)

    async def _on_status(self, requestor: str, task: dict[str, Any]) -> None:
        """R-NOTIFY-1: the whole Task, no related-task ``_meta`` (R-NOTIFY-3).

        Best effort (a MAY; requestors never rely on them, R-NOTIFY-2): the SDK hands a
        connection's messages over one at a time, so at most ``NOTIFY_BACKLOG`` wait per
        connection and the rest are dropped, rather than every ending task (its run, its
        memory) waiting in line behind them when tasks end faster than that."""
        for conn in list(self._connections.get(requestor, ())):
            if not standalone_delivers(self.server, conn):
                continue  # an HTTP session with no GET stream: the SDK would drop it
            waiting = self._notifying.get(conn, 0)
            if waiting >= NOTIFY_BACKLOG:
                self.notifications_dropped += 1
                continue
            self._notifying[conn] = waiting + 1
            try:
                with anyio.move_on_after(5):
                    await conn.notify(NOTIFICATIONS_TASKS_STATUS, dict(task))
            finally:
                self._notifying[conn] -= 1

    # ------------------------------------------------------------------ session end
    async def _session_ended(self, requestor: str) -> None:
        """The session behind ``requestor`` ended: its unfinished tasks cannot be reached."""
        try:
            count = await self.cancel_requestor_tasks(requestor)
        except Exception:
            log.exception("cancelling the tasks of an ended session failed")
            return
        if count:
            log.info("session ended: cancelled %d unfinished task(s)", count)

    async def cancel_requestor_tasks(self, requestor: str) -> int:
        """Cancel every non-terminal task of ``requestor``; how many were cancelled."""
        return await self.engine.cancel_requestor_tasks(requestor, "The task's session ended")

    # ------------------------------------------------------------------ middleware
    async def _middleware(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if ctx.request_id is None or IN_TASK.get():  # notifications, a task's own run
            return await call_next(ctx)
        try:
            ext = self.extension
            if ext is not None and ext.speaks(ctx):
                if ctx.method == TOOLS_CALL:
                    answer: HandlerResult = await ext.tools_call(ctx, call_next)
                    return answer
                return await call_next(ctx)
            if ctx.method == TOOLS_CALL:
                return await self._tools_call(ctx, call_next)
            result = await call_next(ctx)
            if ctx.method == INITIALIZE:
                self._patch_initialize(ctx, result)
                self._note_session(connection_of(ctx.session))
            elif ctx.method == TOOLS_LIST:
                self._patch_tools_list(ctx, result)
            return result
        except MCPError:
            raise
        except ValidationError as exc:
            raise to_sdk_error(validation_error(exc)) from None
        except TaskError as exc:
            raise to_sdk_error(exc) from None
        except Exception as exc:
            raise internal_error(exc, ctx.method) from None

    def _patch_initialize(self, ctx: ServerRequestContext[Any, Any], result: HandlerResult) -> None:
        if not isinstance(result, dict) or result.get("protocolVersion") != PROTOCOL_VERSION:
            return
        _, identified = self.requestor_of(ctx)
        caps = result.setdefault("capabilities", {})
        caps["tasks"] = build_tasks_capability(
            "server",
            requests=sorted(AUGMENTABLE["server"]),
            list=identified or self.list_without_identity,
            cancel=True,
        )

    def _patch_tools_list(self, ctx: ServerRequestContext[Any, Any], result: HandlerResult) -> None:
        if not isinstance(result, dict):
            return
        tools = [t for t in result.get("tools", []) if isinstance(t, dict)]
        if not self._tools_checked and not result.get("nextCursor"):
            try:
                self._check_names(str(t.get("name")) for t in tools)
            except ValueError as exc:  # a low-level Server: known only now
                log.error("McpTasks: %s", exc)
        if ctx.protocol_version != PROTOCOL_VERSION:
            return
        for tool in tools:
            support = self.task_support.get(tool.get("name", ""))
            if support is not None:
                tool["execution"] = {**(tool.get("execution") or {}), "taskSupport": support}

    async def _tools_call(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        try:
            raw, parsed = tool_call_params(ctx.params)
        except TaskError as exc:
            raise to_sdk_error(exc) from None
        augmented = raw.get("task") is not None
        declared = connection_of(ctx.session).protocol_version == PROTOCOL_VERSION
        support = self.task_support.get(parsed.name)
        if support is None and not augmented:
            return await call_next(ctx)  # a tool we do not manage: the SDK answers as usual
        as_task = check_tool_call(parsed.name, support, augmented=augmented, declared=declared)
        params = {k: v for k, v in raw.items() if k != "task"}
        if not as_task:
            return await call_next(dataclasses.replace(ctx, params=params))  # R-CREATE-4
        task = raw.get("task")
        return await self._start_task(ctx, call_next, params, task)

    async def _start_task(
        self,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
        params: dict[str, Any],
        task: Any,
    ) -> HandlerResult:
        requestor, _ = self.requestor_of(ctx)
        conn = connection_of(ctx.session)

        async def run(dctx: Any, call_params: dict[str, Any]) -> HandlerResult:
            session = task_session(dctx, conn)
            return await call_next(dataclasses.replace(ctx, params=call_params, session=session))

        return await self.start_task(self._context(ctx, requestor), conn, run, params, task)

    async def start_task(
        self,
        rctx: RequestContext,
        conn: Connection,
        run: RunTool,
        params: dict[str, Any],
        task: Any,
    ) -> dict[str, Any]:
        """Create a task of a ``tools/call`` whose tool ``run(dctx, params)`` runs in the
        background with the task-scoped outbound ``dctx`` (:class:`TaskOutbound`);
        return the ``CreateTaskResult`` wire JSON at once (R-CREATE-2)."""
        self.remember(rctx.requestor, conn)
        self._watch_session_end(rctx.requestor, conn)

        async def work(tctx: TaskContext) -> dict[str, Any]:
            outbound = TaskOutbound(conn, tctx, rctx.progress_token, rctx.request_id)
            try:
                return _wire(await run(outbound, params))
            except MCPError as exc:
                raise from_sdk_error(exc) from None
            except ValidationError as exc:
                raise validation_error(exc) from None

        created = await self.engine.create_task(
            rctx,
            TOOLS_CALL,
            work,
            task=task if isinstance(task, Mapping) else {},
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
            ext = self.extension
            if ext is not None and ext.speaks(ctx):
                try:
                    result: dict[str, Any] = await ext.handle(method, ctx)
                    return result
                except TaskError as exc:
                    raise to_sdk_error(exc) from None
            if method not in TASK_REQUEST_METHODS:  # the extension's own methods
                raise to_sdk_error(MethodNotFound(detail=method))
            requestor, _identified = self.requestor_of(ctx)
            self.remember(requestor, connection_of(ctx.session))
            params = dict(ctx.params or {})
            on_input = self._input_sender(ctx) if method == TASKS_RESULT else None
            try:
                return await self.engine.handle(
                    method, params, self._context(ctx, requestor), on_input=on_input
                )
            except TaskError as exc:
                raise to_sdk_error(exc) from None
            except MCPError:
                raise
            except Exception as exc:
                raise internal_error(exc, method) from None

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
                    channel = request_outbound(session)
                    answer: dict[str, Any] = await channel.send_raw_request(
                        pending.method, pending.params
                    )
                    return answer
                return await conn.send_raw_request(pending.method, pending.params)
            except MCPError as exc:
                raise from_sdk_error(exc) from None

        return send


def add_tasks(server: Any, **kwargs: Any) -> McpTasks:
    """One call: ``tasks = add_tasks(server, task_support={...})``; then ``async with tasks:``."""
    return McpTasks(server, **kwargs)
