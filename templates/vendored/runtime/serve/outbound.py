"""What a tool running in a task sends, and the server as a requestor of client tasks.

:class:`TaskOutbound` (the core face) and :class:`PollOutbound` (the extension face) are
the request-scoped channel of the task-scoped ``ServerSession`` a tool gets inside a task;
:func:`request_client_task` sends a task-augmented request to the client and follows it to
its result.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio

from ...core.capabilities import peer_supports
from ...core.meta import RELATED_TASK_KEY
from ...errors import MethodNotFound, TaskError
from ...protocol import (
    INPUT_REQUIRED,
    SERVER_REQUEST_METHODS,
    TASK_REQUEST_METHODS,
    TASKS_GET,
    TASKS_RESULT,
    TERMINAL,
)
from ..engine.runs import LazyEvent, TaskContext
from ..polling import poll_delay
from ..sdk import PING, PROGRESS, Connection, ServerSession, connection_of, to_sdk_error

__all__ = [
    "INPUT_METHODS",
    "PollOutbound",
    "TaskDispatchContext",
    "TaskOutbound",
    "request_client_task",
]

INPUT_METHODS = frozenset(SERVER_REQUEST_METHODS - {PING, *TASK_REQUEST_METHODS})
"""Server requests a task's tool may send that wait for the client (elicitation, sampling,
roots): they move the task to ``INPUT_REQUIRED`` and go out on the ``TASKS_RESULT`` stream."""


class TaskDispatchContext:
    """What a task-scoped stand-in for ``mcp.shared.dispatcher.DispatchContext`` has on
    either face: its task, no transport, a cancel event made on first use, and requests
    always sendable (each face answers them through its own tasks request)."""

    def __init__(self, tctx: TaskContext, request_id: Any = None) -> None:
        self.tctx = tctx
        self.request_id = request_id
        self.message_metadata: Any = None
        self._cancel_requested: anyio.Event | None = None

    #: Made on first use: an anyio.Event per task is measurable (benchmarks/peers).
    cancel_requested = LazyEvent()

    @property
    def transport(self) -> Any:
        return None

    @property
    def can_send_request(self) -> bool:
        return True  # answered through tasks/result or tasks/update, whatever the transport

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: Any = None) -> None:
        """An explicit ``send_progress_notification`` goes to :meth:`progress`; other
        notifications have no channel here and are dropped."""
        if method == PROGRESS and params:
            value, total = params.get("progress"), params.get("total")
            if isinstance(value, int | float):
                message = params.get("message")
                await self.progress(
                    value,
                    total if isinstance(total, int | float) else None,
                    message if isinstance(message, str) else None,
                )

    async def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        await self.tctx.report_progress(progress, total, message)


class TaskOutbound(TaskDispatchContext):
    """Duck-types ``mcp.shared.dispatcher.DispatchContext`` for the tool running in a task.

    Requests (elicitation, sampling) become the task's pending input (R-INPUT-1..4);
    notifications go to the connection's standalone channel with related-task
    ``_meta`` (R-META-1); progress keeps the original token (R-PROGRESS-1).
    """

    def __init__(self, conn: Connection, tctx: TaskContext, request_id: Any) -> None:
        super().__init__(tctx, request_id)
        self.conn = conn
        self.progress_token = tctx.progress_token

    def _related(self, params: Mapping[str, Any] | None) -> dict[str, Any]:
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
                return await self.tctx.request_input(method, self._related(params))
            except TaskError as exc:
                raise to_sdk_error(exc) from None
        return await self.conn.send_raw_request(method, self._related(params), opts)

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: Any = None) -> None:
        if method == PROGRESS:
            await self.conn.notify(method, params, opts)
        else:
            await self.conn.notify(method, self._related(params), opts)

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
        await self.conn.notify(PROGRESS, params)


class PollOutbound(TaskDispatchContext):
    """Duck-types ``mcp.shared.dispatcher.DispatchContext`` for a tool running in a task of
    the extension face: its elicitation/sampling/roots requests become the task's pending
    input (``inputRequests``, X-UPD-1), with the tool's own params (no related-task
    ``_meta``). Progress and log notifications have no channel for a task there (X-NOTIF-7):
    progress becomes the task's ``statusMessage`` (``TaskContext.report_progress``), log
    messages are dropped."""

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: Any = None
    ) -> dict[str, Any]:
        if method not in INPUT_METHODS:
            raise to_sdk_error(MethodNotFound(detail=f"{method} cannot be sent from a task"))
        try:
            return await self.tctx.request_input(method, dict(params or {}))
        except TaskError as exc:
            raise to_sdk_error(exc) from None


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
    while current.get("status") not in TERMINAL and current.get("status") != INPUT_REQUIRED:
        interval = current.get("pollInterval")
        await anyio.sleep(
            poll_delay(interval if isinstance(interval, int) else None, default_poll_ms)
        )
        current = await conn.send_raw_request(TASKS_GET, {"taskId": task_id})
        if on_status is not None:
            await on_status(dict(current))
    return await conn.send_raw_request(TASKS_RESULT, {"taskId": task_id})
