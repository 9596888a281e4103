"""Task notifications on ``subscriptions/listen`` (the extension face, X-NOTIF-1..8).

A ``subscriptions/listen`` whose ``params.notifications`` asks for ``taskIds``:

- without the extension declared in the request's own ``_meta`` envelope: ``-32021`` with
  ``data.requiredCapabilities`` (X-NOTIF-4);
- naming more than :data:`~.router.LISTEN_MAX_IDS` task ids: ``-32602`` saying so; each id
  it names counts once against the requestor's rate limit as it arrives (R-SEC-3);
- else the acknowledgement first, listing the task ids the server agrees to notify about:
  those of the requestor's own tasks that ``tasks/get`` finds (another's, or an unknown
  id, is left out exactly alike: X-SEC-1), at most :data:`~.router.LISTEN_MAX_TASKS`
  (X-NOTIF-3, X-NOTIF-8), as :meth:`~.router.Router.subscribe` decides;
- then one ``notifications/tasks`` per change of each task: the complete ``DetailedTask``,
  produced by the same router call as a ``tasks/get`` of that task at that moment (so a
  handler's own ``tasks_get`` shapes both), without ``resultType``, with
  ``_meta["io.modelcontextprotocol/subscriptionId"]`` = the listen request's id (X-NOTIF-5,
  X-NOTIF-8); never progress or log messages (X-NOTIF-7).

Changes are learnt as ``tasks/result`` waits learn them: the engine's coordination (a task
running here wakes its waiters; a shared store's change events wake them on every instance;
a bounded re-read otherwise), or the task's ``pollIntervalMs`` for tasks the engine does not
keep (a handler over its own job system).

The reads that follow a task are the server's own work: no rate limit counts them (the
requestor's budget was spent on the listen as it arrived). A read that fails for any reason
but the task being gone (unknown, expired: ``-32602``) is made again after a backoff, never
taken for the task's end.

When a subscription ends (the spec leaves it open, A-20): a task's notifications end with its
terminal one (or when it expires or is gone). A listen that asked for task ids only ends once every one
of them has ended: its result (``resultType: "complete"``, with the subscription id) is the
last message. A listen that also asked for other notifications (``toolsListChanged``, ...)
is served by the SDK's own listen handler as well and lasts as long as that one does.
A ``subscriptions/listen`` without ``taskIds`` goes to the SDK's handler unchanged.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio

from ... import protocol
from ..._handlers import dump
from ...errors import MethodNotFound, TaskError
from ...store import rfc3339
from ..engine.limits import unmetered
from ..sdk import listen_ack_method, request_outbound
from .router import TaskRequest, task_gone
from .serving import Serving

__all__ = ["TaskListen"]

log = logging.getLogger(__name__)

Send = Callable[[str, dict[str, Any]], Awaitable[None]]


class TaskListen:
    """The ``subscriptions/listen`` request handler of one server (see the module):
    the request as the SDK door hands every request to the router (``request``), which
    decides what it is notified about (:meth:`~.router.Router.subscribe`)."""

    def __init__(
        self,
        serving: Serving,
        original: Any | None,
        request: Callable[[Any], TaskRequest],
        sdk_error: Callable[[Exception, str], Exception],
        ext: Any,
    ) -> None:
        self.serving = serving
        self.router = serving.router
        self.original = original  # the SDK's HandlerEntry for subscriptions/listen, if any
        self.request = request
        self.sdk_error = sdk_error
        self.ext = ext  # the tasks extension's facts (faces.EXTENSION)

    async def __call__(self, ctx: Any, _params: Any) -> Any:
        req = self.request(ctx)
        try:
            agreed = await self.router.subscribe(req)
        except Exception as exc:
            raise self.sdk_error(exc, req.method) from None
        if agreed is None:
            return await self._sdk(ctx, req.params)
        get = _TaskGet(self, req)
        notes = req.params["notifications"]
        others = {k: v for k, v in notes.items() if k != self.ext.NOTIFICATION_FILTER}
        if others and self.original is not None:
            return await self._with_sdk(ctx, req.params, agreed, get)
        sid = req.id
        send = _sender(ctx.session)
        ack = {"notifications": {self.ext.NOTIFICATION_FILTER: agreed},
               "_meta": {self.ext.SUBSCRIPTION_ID_KEY: sid}}  # fmt: skip
        await send(listen_ack_method(), ack)  # the first message on the stream (X-NOTIF-8)
        async with anyio.create_task_group() as tg:
            for task_id in agreed:
                tg.start_soon(get.follow, task_id, send)
        return {
            "resultType": self.ext.RESULT_TYPE_COMPLETE,
            "_meta": {self.ext.SUBSCRIPTION_ID_KEY: sid},
        }

    async def _sdk(self, ctx: Any, params: dict[str, Any]) -> Any:
        """The SDK's own listen handler, with its own params model (or none: -32601)."""
        if self.original is None:
            raise self.sdk_error(MethodNotFound(detail=self.ext.NOTIFICATION_CHANNEL), "")
        typed = self.original.params_type.model_validate(params, by_name=False)
        return await self.original.handler(ctx, typed)

    async def _with_sdk(
        self, ctx: Any, params: dict[str, Any], agreed: list[str], get: _TaskGet
    ) -> Any:
        """Other notifications asked too: the SDK's handler serves them and writes the ack,
        to which ``agreed`` is added; task notifications follow the ack."""
        acked = anyio.Event()
        send = _sender(ctx.session)
        proxy = _AckSession(ctx.session, send, self.ext.NOTIFICATION_FILTER, agreed, acked)
        scoped = dataclasses.replace(ctx, session=proxy)
        async with anyio.create_task_group() as tg:

            async def notify_after_ack() -> None:
                await acked.wait()
                async with anyio.create_task_group() as inner:
                    for task_id in agreed:
                        inner.start_soon(get.follow, task_id, send)

            tg.start_soon(notify_after_ack)
            result = await self._sdk(scoped, params)
            tg.cancel_scope.cancel()
        return result


class _TaskGet:
    """One listen stream's ``tasks/get`` of its tasks, through the router as its requestor,
    and the loop that follows one task to its end."""

    def __init__(self, listen: TaskListen, req: TaskRequest) -> None:
        self.listen = listen
        self.req = req
        self.requestor = req.requestor
        self.sid = req.id

    async def get(self, task_id: str) -> dict[str, Any]:
        """The task as ``tasks/get`` answers it now: the server's read, no rate limit's."""
        router = self.listen.router
        with unmetered():
            answer = await router.route(router.subscribed_get(self.req, task_id))
        assert isinstance(answer, dict)
        return answer

    async def follow(self, task_id: str, send: Send) -> None:
        """A notification per change of the task, to its terminal one (X-NOTIF-5)."""
        ext, engine = self.listen.ext, self.listen.serving.engine
        last: dict[str, Any] | None = None
        failures = 0
        while True:
            try:
                task = await self.get(task_id)
            except TaskError as exc:
                if task_gone(exc):
                    return  # expired or gone: nothing more to tell
                failures += 1
                if failures == 1:
                    log.warning(
                        "listen %r: task %s not read (%s); reading it again", self.sid,
                        task_id, exc.message,
                    )  # fmt: skip
                await anyio.sleep(engine.config.retry_delay_s(failures))
                continue
            failures = 0
            if task != last:
                last = task
                params = {k: v for k, v in task.items() if k != "resultType"}
                params["_meta"] = {ext.SUBSCRIPTION_ID_KEY: self.sid}
                await send(ext.NOTIFICATIONS_TASKS, params)
            if task.get("status") in {s.value for s in protocol.TERMINAL}:
                return
            await self._changed(engine, task_id, task)

    async def _changed(self, engine: Any, task_id: str, task: Mapping[str, Any]) -> None:
        """Until the task may have changed since ``task`` (what was told last): the engine's
        wake-ups for a task it keeps, its ``pollIntervalMs`` otherwise (a handler that
        keeps its own tasks)."""
        with engine.coordination.waiter(task_id, self.requestor) as waiter:
            waiter.arm()  # before the read: a change after it wakes the wait
            try:
                rec = await engine.lookup(self.requestor, task_id)
            except TaskError:
                rec = None
            if rec is None:
                interval = task.get("pollIntervalMs")
                await anyio.sleep((interval if isinstance(interval, int) else 1000) / 1000)
            elif (rec.status.value, rfc3339(rec.last_updated_at)) == (
                task.get("status"),
                task.get("lastUpdatedAt"),
            ):
                await waiter.wait(rec)


class _AckSession:
    """A request's ``ServerSession`` whose first notification (the SDK's acknowledgement)
    goes out with the agreed task ids added, and sets ``acked``."""

    def __init__(
        self, session: Any, send: Send, key: str, agreed: list[str], acked: anyio.Event
    ) -> None:
        self._session, self._send, self._key = session, send, key
        self._agreed, self._acked = agreed, acked

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)

    async def send_notification(self, notification: Any, related_request_id: Any = None) -> None:
        if self._acked.is_set() or related_request_id is None:
            await self._session.send_notification(notification, related_request_id)
            return
        data = dump(notification)
        params = dict(data.get("params") or {})
        params["notifications"] = {**params.get("notifications", {}), self._key: self._agreed}
        await self._send(data["method"], params)
        self._acked.set()


def _sender(session: Any) -> Send:
    """Notifications on the listen request's own stream (its SSE response or stdio)."""
    outbound = request_outbound(session)

    async def send(method: str, params: dict[str, Any]) -> None:
        await outbound.notify(method, params)

    return send
