"""Use tasks from an ``mcp`` (2.3.x) client.

Requestor side, :class:`TaskRequestor` (works on any ``ClientSession``):
call a tool as a task after checking the server's capability and the tool's
``taskSupport`` (R-CAP-3, R-TOOL-1), poll honouring ``pollInterval`` (R-GET-1,
R-GET-2), switch to ``tasks/result`` on ``input_required`` (R-INPUT-3) so the
requests delivered there reach the session's ordinary elicitation/sampling
callbacks, list and cancel; typed results (the generated models).

Receiver side, :class:`TasksClientSession` (a ``ClientSession``): declares
``tasks.requests.elicitation.create`` / ``tasks.requests.sampling.createMessage``
(R-CAP-1), accepts such task-augmented requests from the server with
``CreateTaskResult`` (R-CREATE-2), runs the ordinary callbacks inside the task
engine, and serves ``tasks/get|result|list|cancel`` for them. It also receives
``notifications/tasks/status`` (never relied upon: R-NOTIFY-2), and on the tasks
extension's face ``notifications/tasks``, which wake its polls early (X-NOTIF-6).

Across a dropped connection (a server restart): requests about an existing task are sent
again for ``retry_s`` (on an HTTP client from :func:`http_client`, whose failed requests end
that request, not the session), then :class:`ConnectionLost` carries the task id
(``mcp_retry``).

Both faces: on a session that negotiated the tasks extension's revision (2026-07-28,
``session.protocol_version``), :attr:`TaskRequestor.ext` is the extension's requestor
(``client.extension.ExtTaskRequestor``: ``tasks/get`` polled at ``pollIntervalMs``,
``inputRequests`` answered through ``tasks/update``, cancel) and the face-neutral calls
(``run_tool``, ``call_tool``, ``result``, ``tool_result``) use it; the 2025-11-25-only calls
say so (:class:`TaskNotSupported`). A package generated without the extension's schema
has no ``client.extension`` and serves the 2025-11-25 face only.

Private SDK attributes (raw requests that bypass the SDK's CallToolResult
validation, the request and capability hooks) are reached only through ``_sdk``.
"""

from __future__ import annotations

import builtins
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.client.extension import NotificationBinding
from mcp.client.session import ClientSession
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ... import protocol
from ..._handlers import dump
from ...core.capabilities import (
    build_tasks_capability,
    may_call_tool_as_task,
    peer_supports_cancel,
    peer_supports_list,
    tool_task_support,
)
from ...core.handlers import RequestContext
from ...protocol import (
    AUGMENTABLE,
    INPUT_REQUIRED,
    NOTIFICATIONS_TASKS_STATUS,
    REVISION,
    TASK_REQUEST_METHODS,
    TASK_SUPPORT_REQUIRED,
    TASKS_CANCEL,
    TASKS_GET,
    TASKS_LIST,
    TASKS_RESULT,
    TERMINAL,
    TOOLS_CALL,
)
from ...store import TaskStore
from ..engine.task_engine import EngineConfig, TaskContext, TaskEngine
from ..faces.core import CoreTasks
from ..sdk import ClientSessionHooks, run_input_callback, send_raw_request
from .retry import (
    ConnectionLost,
    ServerUnreachable,
    http_client,
    is_connection_failure,
    one_error,
    poll_delay,
    retrying,
)
from .status import TaskNotSupported, call_back, changes_only, progress_of_status
from .typed import RequestorTransport, SessionTransport

if TYPE_CHECKING:  # absent from a package generated without the extension's schema
    from .extension import (  # type: ignore[import-not-found, unused-ignore]
        ExtTaskRequestor,
        TaskWakeups,
    )

__all__ = [
    "TERMINAL",
    "ConnectionLost",
    "ProgressCallback",
    "ServerUnreachable",
    "StatusCallback",
    "TaskNotSupported",
    "TaskRequestor",
    "TasksClientSession",
    "connect",
    "http_client",
    "status_binding",
]

log = logging.getLogger(__name__)

StatusCallback = Callable[[protocol.Task], Awaitable[None] | None]
#: ``on_progress(progress, total, message)``: a task's ``notifications/progress``
ProgressCallback = Callable[[float, float | None, str | None], Awaitable[None]]
#: how long a requestor retries a request about a task across a dropped connection
RETRY_S = 30.0
CLIENT_TASK_METHODS = tuple(sorted(AUGMENTABLE["client"]))


def _ext_requestor(
    session: ClientSession, default_poll_ms: int, wakeups: TaskWakeups | None, retry_s: float
) -> ExtTaskRequestor | None:
    """The tasks extension's requestor when ``session`` negotiated its revision."""
    if session.protocol_version in (None, REVISION):
        return None
    try:
        from .extension import ExtTaskRequestor, is_modern
    except ImportError:  # generated without the extension's schema: 2025-11-25 only
        return None
    if not is_modern(session):
        return None
    return ExtTaskRequestor(
        session, default_poll_ms=default_poll_ms, wakeups=wakeups, retry_s=retry_s
    )


def status_binding(
    handler: Callable[[dict[str, Any]], Awaitable[None]],
) -> NotificationBinding[types.TaskStatusNotificationParams]:
    """A ``NotificationBinding`` handing each ``notifications/tasks/status`` Task (wire dict)
    to ``handler``; the stock client drops them otherwise."""

    async def on_status(params: types.TaskStatusNotificationParams) -> None:
        await handler({k: v for k, v in dump(params).items() if k != "_meta"})

    return NotificationBinding(
        method=NOTIFICATIONS_TASKS_STATUS,
        params_type=types.TaskStatusNotificationParams,
        handler=on_status,
    )


async def raw_request(
    session: ClientSession,
    method: str,
    params: Mapping[str, Any] | None = None,
    *,
    timeout: float | None = None,
) -> dict[str, Any]:
    """Send any request and return the raw result dict (no SDK result validation)."""
    return await send_raw_request(session, method, params, timeout=timeout)


def _wakeups() -> TaskWakeups | None:
    try:
        from .extension import TaskWakeups
    except ImportError:  # generated without the extension's schema
        return None
    return TaskWakeups()


class TaskRequestor(RequestorTransport):
    """Requestor helpers over a ``ClientSession`` that has been initialized.

    ``retry_s``: requests about an existing task (``tasks/get``, ``tasks/result``,
    ``tasks/cancel``, ``tasks/list``; on the extension ``tasks/update`` too) are sent again
    across a dropped connection for that long (the session's HTTP client made by
    :func:`http_client`, so that a failed connection ends one request, not the session);
    then, or when the session itself ended, :class:`ConnectionLost` carries the task id.
    ``typed(TasksClient)``: a generated face's typed client over it (``client.typed``)."""

    def __init__(
        self,
        session: ClientSession,
        *,
        default_poll_ms: int = 500,
        wakeups: TaskWakeups | None = None,
        retry_s: float = RETRY_S,
    ) -> None:
        self.session = session
        self.default_poll_ms = default_poll_ms
        self.wakeups = wakeups
        self.retry_s = retry_s
        self._tools: dict[str, types.Tool] = {}
        self._listed = False

    # ---------------------------------------------------------------- negotiation
    @property
    def ext(self) -> ExtTaskRequestor | None:
        """The tasks extension face when the session negotiated its revision, else None
        (the 2025-11-25 face: every other method of this class)."""
        return _ext_requestor(self.session, self.default_poll_ms, self.wakeups, self.retry_s)

    def _legacy_only(self, what: str) -> None:
        if self.ext is not None:
            raise TaskNotSupported(
                f"{what} does not exist in protocol revision {self.session.protocol_version} "
                "(the tasks extension, X-COMPAT-4); use TaskRequestor.ext there"
            )

    @property
    def server_capabilities(self) -> types.ServerCapabilities | None:
        init = self.session.initialize_result
        if init is None:
            return self.session.server_capabilities
        return init.capabilities

    async def _list_tools(self) -> None:
        cursor: str | None = None
        while True:
            listing = await self.session.list_tools(
                params=types.PaginatedRequestParams(cursor=cursor) if cursor else None
            )
            for tool in listing.tools:
                self._tools[tool.name] = tool
            cursor = listing.next_cursor
            if not cursor:
                break
        self._listed = True

    async def tool(self, name: str) -> types.Tool | None:
        if name not in self._tools:
            await self._list_tools()
        return self._tools.get(name)

    async def tools(self) -> list[types.Tool]:
        """Every tool the server lists (``tools/list``, all its pages)."""
        if not self._listed:
            await self._list_tools()
        return list(self._tools.values())

    async def task_support(self, name: str) -> str:
        tool = await self.tool(name)
        return tool_task_support(dump(tool) if tool else None)

    async def may_call_as_task(self, name: str) -> bool:
        """R-CAP-3 and R-TOOL-1 (server capability first), then R-TOOL-2/3/4. On the tasks
        extension: the server lists it (X-CAP-2); no tool-level flag exists there."""
        if (ext := self.ext) is not None:
            return bool(ext.server_offers_tasks())
        tool = await self.tool(name)
        return may_call_tool_as_task(self.server_capabilities, dump(tool) if tool else None)

    # ---------------------------------------------------------------- requests
    async def call_tool_as_task(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        ttl: int | None = None,
        progress_token: str | int | None = None,
        check: bool = True,
    ) -> protocol.CreateTaskResult:
        """Send a task-augmented ``tools/call``; answers ``CreateTaskResult`` (R-CREATE-2).
        2025-11-25 only (the extension's is ``ext.call_tool``)."""
        self._legacy_only("a task-augmented tools/call with a task parameter")
        if check and await self.tool(name) is None:
            raise TaskNotSupported(f"Unknown tool: {name} (the server's tools/list lacks it)")
        if check and not await self.may_call_as_task(name):
            raise TaskNotSupported(
                f"tool {name!r} cannot be called as a task here (R-CAP-3, R-TOOL-1, R-TOOL-2)"
            )
        params: dict[str, Any] = {"name": name, "arguments": dict(arguments or {})}
        params["task"] = {} if ttl is None else {"ttl": ttl}
        if progress_token is not None:
            params["_meta"] = {"progressToken": progress_token}
        raw = await raw_request(self.session, TOOLS_CALL, params)
        return protocol.CreateTaskResult.model_validate(raw)

    async def get(self, task_id: str) -> protocol.Task:
        """``tasks/get`` (R-GET-3); on the tasks extension ``ext.get`` (another model)."""
        self._legacy_only("the 2025-11-25 Task of tasks/get")
        raw = await self._send(TASKS_GET, {"taskId": task_id})
        return protocol.Task.model_validate(raw)

    async def result(self, task_id: str) -> dict[str, Any]:
        """``tasks/result``: blocks until terminal (R-RESULT-2); raises ``MCPError`` with the
        stored JSON-RPC error (R-RESULT-1). Input requests arriving meanwhile are answered
        by the session's callbacks. On the tasks extension, where ``tasks/result`` is gone
        (X-COMPAT-4): polls ``tasks/get`` to the end instead (X-GET-2), answering its
        ``inputRequests``, and returns the inlined result (X-GET-9)."""
        if (ext := self.ext) is not None:
            done = await ext.tool_result(task_id)
            return dump(done)
        return await self._send(TASKS_RESULT, {"taskId": task_id})

    async def tool_result(self, task_id: str) -> types.CallToolResult:
        """``tasks/result`` of a ``tools/call`` task, typed (R-RESULT-3)."""
        return types.CallToolResult.model_validate(await self.result(task_id))

    async def list(self, cursor: str | None = None) -> protocol.ListTasksResult:
        """``tasks/list`` (one page; follow ``nextCursor``); 2025-11-25 only."""
        self._legacy_only(TASKS_LIST)
        if not peer_supports_list(self.server_capabilities):
            raise TaskNotSupported("the server did not declare tasks.list")
        raw = await self._send(TASKS_LIST, {"cursor": cursor} if cursor else {})
        return protocol.ListTasksResult.model_validate(raw)

    async def list_all(self) -> builtins.list[protocol.Task]:
        out: builtins.list[protocol.Task] = []
        cursor: str | None = None
        while True:
            page = await self.list(cursor)
            out.extend(page.tasks)
            cursor = page.nextCursor
            if not cursor:
                return out

    async def cancel(self, task_id: str) -> protocol.Task:
        """``tasks/cancel``; ``-32602`` for a terminal task (R-CANCEL-1). On the tasks
        extension ``ext.cancel`` (an empty ack)."""
        self._legacy_only("the 2025-11-25 Task of tasks/cancel")
        if not peer_supports_cancel(self.server_capabilities):
            raise TaskNotSupported("the server did not declare tasks.cancel")
        raw = await self._send(TASKS_CANCEL, {"taskId": task_id})
        return protocol.Task.model_validate(raw)

    async def _send(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """A request about existing tasks: idempotent, so retried across a dropped
        connection (:class:`ConnectionLost` with the task id when that does not help)."""
        task_id = params.get("taskId")
        return await retrying(
            lambda: raw_request(self.session, method, params),
            str(task_id) if task_id is not None else None,
            self.retry_s,
        )

    # ---------------------------------------------------------------- flows
    async def wait(
        self,
        task_id: str,
        *,
        on_status: StatusCallback | None = None,
        first: protocol.Task | None = None,
    ) -> protocol.Task:
        """Poll ``tasks/get`` until terminal or ``input_required`` (R-GET-1, R-GET-2),
        sleeping ``pollInterval`` between polls; never waits for notifications (R-NOTIFY-2).
        ``on_status(task)`` gets the first task and each change of its status."""
        report = changes_only(on_status)
        task = first if first is not None else await self.get(task_id)
        await call_back(report, task)
        while task.status not in TERMINAL and task.status != INPUT_REQUIRED:
            await anyio.sleep(poll_delay(task.pollInterval, self.default_poll_ms))
            task = await self.get(task_id)
            await call_back(report, task)
        return task

    async def run_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        ttl: int | None = None,
        progress_token: str | int | None = None,
        on_status: StatusCallback | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> types.CallToolResult:
        """Call a tool as a task and return its CallToolResult: poll, and on
        ``input_required`` or a terminal status fetch ``tasks/result`` (R-INPUT-3,
        R-RESULT-1). A task that failed with a JSON-RPC error raises ``MCPError``; a
        connection that dropped for longer than ``retry_s`` raises :class:`ConnectionLost`
        with the task id. ``on_progress(progress, total, message)`` gets the tool's
        ``notifications/progress`` (R-PROGRESS-1; a token is made when none is given; the
        session must be a :class:`TasksClientSession`, which routes them).
        On the tasks extension the call declares it and the server decides (X-CAP-4);
        ``ttl`` has no request parameter there (the server sets ``ttlMs``), and a task
        reports no progress notifications (X-NOTIF-7): its progress is its
        ``statusMessage``, which ``on_status`` sees and ``on_progress`` gets as its message
        (``on_progress(n, None, message)``, ``n`` counting the messages)."""
        if on_progress is not None and self.ext is not None:
            on_status = progress_of_status(on_status, on_progress)
            return await self._run_tool(name, arguments, ttl, progress_token, on_status)
        if on_progress is None:
            return await self._run_tool(name, arguments, ttl, progress_token, on_status)
        handlers = getattr(self.session, "progress_handlers", None)
        if not isinstance(handlers, dict):
            raise TypeError(
                "on_progress needs a TasksClientSession (a plain ClientSession hands"
                " notifications/progress to its message_handler)"
            )
        token = progress_token if progress_token is not None else f"p-{secrets.token_hex(8)}"
        handlers[token] = on_progress
        try:
            return await self._run_tool(name, arguments, ttl, token, on_status)
        finally:
            handlers.pop(token, None)

    async def _run_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None,
        ttl: int | None,
        progress_token: str | int | None,
        on_status: StatusCallback | None,
    ) -> types.CallToolResult:
        if (ext := self.ext) is not None:
            if not ext.server_offers_tasks():
                raise TaskNotSupported("the server does not list the tasks extension (X-CAP-2)")
            meta = {"progressToken": progress_token} if progress_token is not None else None
            done: types.CallToolResult = await ext.run_tool(
                name, arguments, on_status=on_status, meta=meta
            )
            return done
        created = await self.call_tool_as_task(
            name, arguments, ttl=ttl, progress_token=progress_token
        )
        task = await self.wait(created.task.taskId, on_status=on_status, first=created.task)
        result = await self.tool_result(task.taskId)
        if on_status is not None and task.status not in TERMINAL:
            await call_back(on_status, await self.get(task.taskId))
        return result

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        as_task: bool | None = None,
        **kwargs: Any,
    ) -> types.CallToolResult:
        """Call a tool, as a task when allowed and asked for (``as_task=None``: when the
        tool requires it, R-TOOL-4)."""
        if (ext := self.ext) is not None and as_task is not False:
            if as_task is None and not ext.server_offers_tasks():
                return await self.session.call_tool(name, dict(arguments or {}))
            return await self.run_tool(name, arguments, **kwargs)
        if as_task is None:
            as_task = (await self.task_support(name)) == TASK_SUPPORT_REQUIRED and (
                await self.may_call_as_task(name)
            )
        if as_task:
            return await self.run_tool(name, arguments, **kwargs)
        return await self.session.call_tool(name, dict(arguments or {}))


class TasksClientSession(ClientSessionHooks, SessionTransport[TaskRequestor]):
    """A ``ClientSession`` that is also a task receiver for server-sent
    ``elicitation/create`` and ``sampling/createMessage``, and that
    collects ``notifications/tasks/status``.

    Use ``async with TasksClientSession(read, write, elicitation_callback=...) as s:``
    then ``await s.initialize()``; ``s.tasks`` is a :class:`TaskRequestor`.
    ``receive_tasks=False`` declares no ``tasks`` capability (plain answers, R-CREATE-4).
    """

    def __init__(
        self,
        read_stream: Any = None,
        write_stream: Any = None,
        *args: Any,
        receive_tasks: bool = True,
        task_store: TaskStore | None = None,
        task_config: EngineConfig | None = None,
        on_task_status: Callable[[dict[str, Any]], Awaitable[None]] | None = None,
        notification_bindings: Sequence[NotificationBinding[Any]] | None = None,
        **kwargs: Any,
    ) -> None:
        self.task_statuses: list[dict[str, Any]] = []
        #: progress token -> ``on_progress`` of a ``run_tool`` in progress
        self.progress_handlers: dict[str | int, ProgressCallback] = {}
        kwargs["message_handler"] = self._progress_router(kwargs.get("message_handler"))
        self._on_task_status = on_task_status
        bindings = [*(notification_bindings or ()), status_binding(self._status_received)]
        self.task_wakeups = _wakeups()
        if self.task_wakeups is not None:  # notifications/tasks of the extension's face
            bindings.append(self.task_wakeups.binding())
        super().__init__(read_stream, write_stream, *args, notification_bindings=bindings, **kwargs)
        self.receive_tasks = receive_tasks
        self.engine = TaskEngine(task_store, task_config)
        #: the receiver's handler of the server's tasks/* and task-augmented requests
        self.task_handler = CoreTasks(self.engine)
        self.tasks = TaskRequestor(self, wakeups=self.task_wakeups)

    async def __aenter__(self) -> TasksClientSession:
        await self.engine.__aenter__()
        try:
            await super().__aenter__()
        except BaseException:
            await self.engine.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        try:
            return await super().__aexit__(*exc)
        finally:
            await self.engine.__aexit__(None, None, None)

    def _progress_router(self, handler: Any) -> Any:
        """The session's ``message_handler``: a task's ``notifications/progress`` (sent
        after the task-augmented call returned, so the SDK's own per-request progress
        callback is gone) to its ``run_tool``'s ``on_progress``, then to ``handler``."""

        async def on_message(message: Any) -> None:
            if isinstance(message, types.ProgressNotification):
                p = message.params
                route = self.progress_handlers.get(p.progress_token)
                if route is not None:
                    await route(p.progress, p.total, p.message)
            if handler is not None:
                await handler(message)

        return on_message

    async def _status_received(self, task: dict[str, Any]) -> None:
        self.task_statuses.append(task)
        if self._on_task_status is not None:
            await self._on_task_status(task)

    def extend_capabilities(self, caps: types.ClientCapabilities, version: str) -> None:
        # capabilities.tasks is 2025-11-25's; a modern envelope declaring it would read as
        # "not declared" anyway (X-COMPAT-2)
        if self.receive_tasks and version not in MODERN_PROTOCOL_VERSIONS:
            caps.tasks = types.ClientTasksCapability.model_validate(
                build_tasks_capability("client", requests=CLIENT_TASK_METHODS)
            )

    async def intercept_request(
        self, request_id: str | int | None, method: str, params: Mapping[str, Any] | None
    ) -> dict[str, Any] | None:
        """``tasks/*`` and task-augmented elicitation/sampling; the rest to the SDK."""
        if not self.receive_tasks:
            return None
        p = dict(params or {})
        rctx = RequestContext(requestor="server", request_id=request_id)
        handler = self.task_handler
        if method in TASK_REQUEST_METHODS:
            return await handler.dispatch(method, p, rctx)
        if method in CLIENT_TASK_METHODS and p.get(handler.task_param) is not None:
            return await handler.dispatch_augmented(
                method, p, rctx, work=self._work(method, p, rctx)
            )
        return None

    def _work(self, method: str, params: dict[str, Any], rctx: RequestContext) -> Any:
        """R-CREATE-2: the callback of a task-augmented request, run in its task."""
        own = self.task_handler.without_task(params)
        version = self.protocol_version or REVISION
        request_id = rctx.request_id if rctx.request_id is not None else 0

        async def work(tctx: TaskContext) -> dict[str, Any]:
            return await run_input_callback(self, method, version, own, request_id)

        return work


@asynccontextmanager
async def connect(
    url: str,
    *,
    face: str = REVISION,
    token: str | None = None,
    **session_kwargs: Any,
) -> AsyncIterator[TasksClientSession]:
    """A :class:`TasksClientSession` at ``url`` on :func:`http_client` (requests about a
    task ride out a restart), on ``face``: the core revision (``initialize``) or the tasks
    extension's (``"2026-07-28"``, ``server/discover``). ``token``: a bearer token (its
    subject owns the tasks, which outlive the session: R-SEC-1). A server that does not
    answer raises :class:`ServerUnreachable`; an error inside the block is raised as
    itself, not inside the transport's ``ExceptionGroup``."""
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else None
    with one_error():
        async with (
            http_client(headers=headers) as http,
            streamable_http_client(url, http_client=http) as (read, write),
            TasksClientSession(read, write, **session_kwargs) as session,
        ):
            try:
                await (session.initialize() if face == REVISION else session.discover())
            except Exception as exc:
                if not is_connection_failure(exc):
                    raise
                raise ServerUnreachable(f"no MCP server answers at {url} ({exc})") from None
            yield session
