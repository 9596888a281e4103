"""Tasks from a 2026-07-28 server: the client side of the tasks extension
(``io.modelcontextprotocol/tasks``), on the ``mcp`` 2.3 client.

- :class:`TasksClientExtension` is a ``ClientExtension`` for the stock ``Client``: it
  declares the extension on every modern request (X-CAP-1), claims the ``resultType``
  ``"task"`` answer of ``tools/call`` (a ``ResultClaim``, X-CAP-6, X-RT-1) and resolves it
  to the tool's ``CallToolResult``; it follows ``notifications/tasks`` when the server
  sends them (X-NOTIF-1, X-NOTIF-6: polling never waits for one).
- :class:`ExtTaskRequestor` is the same face over any ``ClientSession`` that negotiated the
  extension's revision (``TaskRequestor`` uses it there): ``tools/call`` with the
  extension declared on that request only (X-CAP-11) and any MRTR rounds answered first
  (X-MRTR-2), ``tasks/get`` polled at ``pollIntervalMs`` (X-GET-1, X-POLL-2),
  ``inputRequests`` answered once each (X-UPD-4) by the session's own elicitation and
  sampling callbacks (X-UPD-3) through ``tasks/update`` (X-UPD-2), ``tasks/cancel``
  (X-CAN-1), each ``tasks/*`` request with its ``Mcp-Name`` (X-HTTP-1).

Every fact (method names, statuses, ``resultType`` values, the identifier) and every
model comes from the generated ``extension`` face; private SDK parts only through ``_sdk``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, cast

import anyio
import mcp_types as types
from mcp.client import ClaimContext, ClientExtension, NotificationBinding, ResultClaim
from mcp.client.session import ClientSession
from pydantic import BaseModel, ConfigDict, create_model

from ..._handlers import dump
from ...errors import RequestCancelled, TaskError, error_from_payload
from ...extension import methods as ext_methods
from ...extension import protocol as ext
from ..sdk import answer_input_request, send_raw_request, to_sdk_error
from .retry import poll_delay, retrying
from .status import call_back, changes_only
from .typed import check_face

__all__ = [
    "ClaimedTask",
    "ExtTaskRequestor",
    "ExtStatusCallback",
    "TaskWakeups",
    "TasksClientExtension",
    "is_modern",
]


#: The claim model the SDK validates a ``resultType: "task"`` answer into: an
#: ``mcp_types.Result`` whose ``result_type`` is the generated ``CreateTaskResult``'s
#: literal; every other member is kept as sent and re-read with the generated model.
class _KeepAll(types.Result):
    model_config = ConfigDict(extra="allow")


_RESULT_TYPE_TASK: Any = ext.CreateTaskResult.model_fields["resultType"].annotation
ClaimedTask: type[types.Result] = create_model(
    "ClaimedTask", __base__=_KeepAll, result_type=(_RESULT_TYPE_TASK, ...)
)
ExtStatusCallback = Callable[[Any], Awaitable[None] | None]
DECLARE: Mapping[str, Mapping[str, Any]] = {ext.EXTENSION_ID: {}}


def is_modern(session: ClientSession) -> bool:
    """Whether ``session`` negotiated the revision this extension is defined for."""
    return session.protocol_version == ext.REVISION


class _TaskNotice(BaseModel):
    """What ``notifications/tasks`` must carry for a wake-up; the rest as sent."""

    model_config = ConfigDict(extra="allow")
    taskId: str


class TaskWakeups:
    """``notifications/tasks`` received (X-NOTIF-5: a whole task each), keyed by task id; a
    poll loop waiting on a task wakes early when one arrives for it."""

    def __init__(self) -> None:
        self.notices: list[dict[str, Any]] = []
        self._events: dict[str, anyio.Event] = {}

    async def received(self, notice: _TaskNotice) -> None:
        self.notices.append(dump(notice))
        event = self._events.pop(notice.taskId, None)
        if event is not None:
            event.set()

    async def sleep(self, task_id: str, seconds: float) -> None:
        """Sleep ``seconds`` or until a notification about ``task_id`` arrives."""
        event = self._events.setdefault(task_id, anyio.Event())
        with anyio.move_on_after(seconds):
            await event.wait()

    def binding(self) -> NotificationBinding[_TaskNotice]:
        return NotificationBinding(
            method=ext.NOTIFICATIONS_TASKS, params_type=_TaskNotice, handler=self.received
        )


class ExtTaskRequestor:
    """The tasks extension's requestor over a ``ClientSession`` on its revision."""

    def __init__(
        self,
        session: ClientSession,
        *,
        default_poll_ms: int = 500,
        wakeups: TaskWakeups | None = None,
        max_rounds: int = 8,
        listen: bool = True,
        retry_s: float = 30.0,
    ) -> None:
        self.session = session
        #: how long a request about a task is sent again across a dropped connection
        self.retry_s = retry_s
        self.default_poll_ms = default_poll_ms
        self.wakeups = wakeups or TaskWakeups()
        self.max_rounds = max_rounds
        #: ask for the task's notifications on ``subscriptions/listen`` while waiting
        self.listen = listen

    async def _send(
        self, method: str, params: Mapping[str, Any], *, task_id: str | None = None
    ) -> dict[str, Any]:
        if task_id is None:  # tools/call: never twice
            return await send_raw_request(self.session, method, params, declare=DECLARE)
        return await retrying(
            lambda: send_raw_request(self.session, method, params, declare=DECLARE, name=task_id),
            task_id,
            self.retry_s,
        )

    def server_offers_tasks(self) -> bool:
        """X-CAP-2: the server lists the extension in ``server/discover``."""
        caps = self.session.server_capabilities
        return caps is not None and ext.EXTENSION_ID in (caps.extensions or {})

    # ------------------------------------------------------------------ requests
    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        meta: Mapping[str, Any] | None = None,
    ) -> ext.CreateTaskResult | types.CallToolResult:
        """``tools/call`` declaring the extension: the flat ``CreateTaskResult`` when the
        server made a task (X-RT-1), else the plain result (X-CREATE-4). MRTR rounds before
        the task are answered with the session's callbacks (X-MRTR-1, X-MRTR-2)."""
        params: dict[str, Any] = {"name": name, "arguments": dict(arguments or {})}
        if meta:
            params["_meta"] = dict(meta)
        raw = await self._create(ext.TOOLS_CALL, params)
        if raw.get("resultType", ext.RESULT_TYPE_COMPLETE) == ext.RESULT_TYPE_TASK:
            return ext_methods.parse_create_task_result(raw)
        return types.CallToolResult.model_validate(raw)

    async def send_task_request(
        self, wire: Any, method: str, params: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The bindings' ``Transport`` (``_client``) on the extension's face, for a generated
        face's typed ``TasksClient`` (``client.typed``): a request that may become a task is
        sent once, its input rounds answered first; any other with its ``Mcp-Name`` and
        retried across a dropped connection (X-HTTP-1)."""
        check_face(wire, ext.REVISION)
        if method in wire.creates:
            return await self._create(method, dict(params))
        task_id = params.get("taskId")
        return await self._send(method, params, task_id=None if task_id is None else str(task_id))

    async def _create(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """A request the server may answer with a task, sent once per input round: its answer
        (the created task's or the complete result), once the MRTR rounds before the task
        are answered with the session's callbacks (X-MRTR-1, X-MRTR-2)."""
        for _ in range(self.max_rounds):
            raw = await self._send(method, params)
            kind = raw.get("resultType", ext.RESULT_TYPE_COMPLETE)
            if kind in (ext.RESULT_TYPE_TASK, ext.RESULT_TYPE_COMPLETE):
                return raw
            asked = types.InputRequiredResult.model_validate(raw)
            params["inputResponses"] = await self._answer(
                {k: dump(v) for k, v in (asked.input_requests or {}).items()}
            )
            params.pop("requestState", None)
            if asked.request_state is not None:
                params["requestState"] = asked.request_state
        name = params.get("name", method)
        raise to_sdk_error(TaskError(f"{name}: more than {self.max_rounds} input rounds"))

    async def get(self, task_id: str) -> ext.GetTaskResult:
        """``tasks/get`` (X-GET-1): the status-discriminated variant."""
        raw = await self._send(ext.TASKS_GET, {"taskId": task_id}, task_id=task_id)
        result: ext.GetTaskResult = ext_methods.RESULTS[ext.TASKS_GET](raw)
        return result

    async def update(self, task_id: str, responses: Mapping[str, Any]) -> ext.UpdateTaskResult:
        """``tasks/update`` with ``inputResponses`` (X-UPD-2); an empty ack (X-UPD-9)."""
        params = {"taskId": task_id, "inputResponses": dict(responses)}
        raw = await self._send(ext.TASKS_UPDATE, params, task_id=task_id)
        return ext.UpdateTaskResult.model_validate(raw)

    async def cancel(self, task_id: str) -> ext.CancelTaskResult:
        """``tasks/cancel`` (X-CAN-1): an empty ack, also for a terminal task (X-CAN-8);
        the status settles later (X-CAN-5)."""
        raw = await self._send(ext.TASKS_CANCEL, {"taskId": task_id}, task_id=task_id)
        return ext.CancelTaskResult.model_validate(raw)

    async def _answer(self, requests: Mapping[str, Any]) -> dict[str, Any]:
        """Each request through the session's callbacks, as if sent standalone (X-UPD-3)."""
        answers: dict[str, Any] = {}
        for key, request in requests.items():
            answers[key] = await answer_input_request(self.session, key, request)
        return answers

    # ------------------------------------------------------------------ flows
    async def wait(
        self,
        task_id: str,
        *,
        first: Any = None,
        on_status: ExtStatusCallback | None = None,
        answer_inputs: bool = True,
    ) -> ext.GetTaskResult:
        """Poll ``tasks/get`` until terminal (X-GET-2), sleeping ``pollIntervalMs``
        (X-POLL-2; ``default_poll_ms`` when absent, X-POLL-4) or until a
        ``notifications/tasks`` for the task arrives; answer new ``inputRequests`` keys
        once each (X-UPD-4) unless ``answer_inputs`` is false (then return at
        ``input_required``)."""
        if not self.listen:
            return await self._poll(task_id, first, on_status, answer_inputs)
        outcome: list[ext.GetTaskResult] = []
        failure: list[BaseException] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._listen, task_id)
            try:
                outcome.append(await self._poll(task_id, first, on_status, answer_inputs))
            except Exception as exc:  # raised as is, not inside the task group's group
                failure.append(exc)
            tg.cancel_scope.cancel()
        if failure:
            raise failure[0]
        return outcome[0]

    async def _listen(self, task_id: str) -> None:
        """``subscriptions/listen`` for the task's ``notifications/tasks`` (X-NOTIF-2): each
        one wakes the poll loop at once (X-NOTIF-6: polling goes on, as a safety net). A
        server that does not offer them refuses or ignores the request: polling alone."""
        params = {"notifications": {ext.NOTIFICATION_FILTER: [task_id]}}
        try:
            await send_raw_request(self.session, ext.NOTIFICATION_CHANNEL, params, declare=DECLARE)
        except Exception:  # not offered (-32601, -32021, a transport without a stream)
            return

    async def _poll(
        self,
        task_id: str,
        first: Any,
        on_status: ExtStatusCallback | None,
        answer_inputs: bool,
    ) -> ext.GetTaskResult:
        seen: set[str] = set()
        report = changes_only(on_status)  # a poll that saw nothing new reports nothing
        task: Any = first if first is not None else await self.get(task_id)
        while True:
            await call_back(report, task)
            if task.status in ext.TERMINAL:
                return cast(ext.GetTaskResult, task)
            asking = getattr(task, "inputRequests", None) or {}
            fresh = {k: v for k, v in asking.items() if k not in seen}
            if task.status == ext.INPUT_REQUIRED and not answer_inputs:
                return cast(ext.GetTaskResult, task)
            if task.status == ext.INPUT_REQUIRED and fresh:
                seen.update(fresh)
                wire = {k: dump(v) for k, v in fresh.items()}
                await self.update(task_id, await self._answer(wire))
            else:
                delay = poll_delay(task.pollIntervalMs or None, self.default_poll_ms)
                await self.wakeups.sleep(task_id, delay)
            task = await self.get(task_id)

    async def resolve(
        self, created: ext.CreateTaskResult, *, on_status: ExtStatusCallback | None = None
    ) -> types.CallToolResult:
        """Wait for a created task and return the tool's result (see :meth:`tool_result`)."""
        return await self.tool_result(
            created.taskId, first=created, on_status=on_status, cancel_on_abandon=True
        )

    async def tool_result(
        self,
        task_id: str,
        *,
        first: Any = None,
        on_status: ExtStatusCallback | None = None,
        cancel_on_abandon: bool = False,
    ) -> types.CallToolResult:
        """Poll a task to its end and return the tool's result (X-GET-9): ``completed``
        gives its ``CallToolResult`` (``isError`` included, X-ERR-1); ``failed`` raises its
        JSON-RPC error as ``MCPError`` (X-ERR-3); ``cancelled`` raises ``-32800``. With
        ``cancel_on_abandon`` (a call in progress: :meth:`resolve`), a caller that gives up
        cancels the task on the server too (X-CAN-1)."""
        try:
            done: Any = await self.wait(task_id, first=first, on_status=on_status)
        except anyio.get_cancelled_exc_class():
            if cancel_on_abandon:
                with anyio.move_on_after(5, shield=True):
                    await self.cancel(task_id)
            raise
        if done.status == ext.COMPLETED:
            return types.CallToolResult.model_validate(done.result)
        if done.status == ext.FAILED:
            raise to_sdk_error(error_from_payload(dump(done.error)))
        raise to_sdk_error(RequestCancelled(detail=f"task {task_id} was cancelled"))

    async def run_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        on_status: ExtStatusCallback | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> types.CallToolResult:
        """Call a tool declaring the extension; a task is polled to its result."""
        answer = await self.call_tool(name, arguments, meta=meta)
        if isinstance(answer, types.CallToolResult):
            return answer
        return await self.resolve(answer, on_status=on_status)


class TasksClientExtension(ClientExtension):
    """Tasks for the stock ``mcp`` 2.3 ``Client``:
    ``Client(url, extensions=[TasksClientExtension()])``. Its ``call_tool`` then returns
    the tool's result whether the server answered at once or with a task; the raw task
    handle is ``client.session.call_tool(..., allow_claimed=True)``."""

    identifier = ext.EXTENSION_ID

    def __init__(
        self,
        *,
        default_poll_ms: int = 500,
        on_status: ExtStatusCallback | None = None,
    ) -> None:
        self.default_poll_ms = default_poll_ms
        self.on_status = on_status
        self.wakeups = TaskWakeups()

    def claims(self) -> Sequence[ResultClaim[Any]]:
        return [
            ResultClaim(
                result_type=ext.RESULT_TYPE_TASK,
                model=ClaimedTask,
                resolve=self.resolve,
                protocol_versions=frozenset({ext.REVISION}),
            )
        ]

    def notifications(self) -> Sequence[NotificationBinding[Any]]:
        return [self.wakeups.binding()]

    def requestor(self, session: ClientSession) -> ExtTaskRequestor:
        return ExtTaskRequestor(session, default_poll_ms=self.default_poll_ms, wakeups=self.wakeups)

    async def resolve(self, claimed: types.Result, ctx: ClaimContext) -> types.CallToolResult:
        created = ext_methods.parse_create_task_result(dump(claimed))
        return await self.requestor(ctx.session).resolve(created, on_status=self.on_status)
