"""Task work on worker processes: the front end's side.

An executor (``executor.py``): a tool declared ``on_workers`` (``McpTasks.tool(...,
on_workers=True, retries=N)``) is not run by the process that accepts its call. The
executors' registry (``executors.py``, the only module that imports this one besides the
worker's) gives the face's handler a :class:`RemoteWork` as the task's work; the engine
stores the task through
:attr:`Offload.guard` (a view of the Redis store whose tasks no front end owns, so no front
end's lease fails them) and hands the task's :class:`Job` to Docket (pydocket: jobs in Redis
streams, redelivered when the worker that took one stops renewing it). Worker processes
(``python -m PACKAGE.worker``, :mod:`.worker`) run it.

What a task's tool sends from a worker comes back through the shared store: input requests
through its input hand-over (any instance's ``tasks/result`` or ``tasks/update`` answers
them), ``statusMessage`` progress on the extension's face, and on 2025-11-25 progress
notifications through :class:`ProgressRelay` (a Redis pub/sub channel) to the front end
whose session holds the original progress token.

Docket's own names live under the store's namespace (``NS:workers``), so one Redis serves
several namespaces apart.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import anyio
import anyio.abc
from pydantic import BaseModel, ConfigDict

from ...errors import InternalError
from ...protocol import TaskStatus
from ...store import TaskRecord, TaskStore
from ..background import aclose_quietly, close_group, open_group
from ..engine.executor import HandedWork
from ..engine.guard import StoreGuard
from ..logs import logger
from ..sdk import PROGRESS

__all__ = [
    "Job",
    "Offload",
    "ProgressRelay",
    "RemoteWork",
    "attempts_key",
    "docket_name",
    "docket_url",
    "progress_channel",
    "tool_call",
]

log = logger("runtime")

#: The owner recorded on tasks whose work runs on workers: never an instance's lease, so
#: no lease reap fails them; a worker that dies is the job's redelivery's business.
WORKERS_OWNER = "workers"
#: How many tasks with a progress token a front end follows at once (the oldest go first).
RELAY_MAX = 10_000


class Job(BaseModel):
    """What a worker needs to run one task's tool (JSON; Docket carries it)."""

    model_config = ConfigDict(extra="forbid")

    task_id: str
    requestor: str
    #: the face (revision) that created the task: how the tool's requests are stamped
    face: str
    #: whether that face is the core one (2025-11-25)
    core: bool
    tool: str
    #: the ``tools/call`` params (``name``, ``arguments``, ``_meta``), without ``task``
    params: dict[str, Any]
    progress_token: str | int | None = None
    #: the status a tool result with ``isError`` ends in
    tool_error: str
    #: runs allowed: 1 + the tool's ``retries`` (a worker that dies mid-run costs one)
    attempts: int = 1
    client_capabilities: dict[str, Any] | None = None


def docket_name(namespace: str) -> str:
    """The Docket of a store namespace."""
    return f"{namespace}:workers"


def progress_channel(namespace: str) -> str:
    """The pub/sub channel of workers' progress reports (2025-11-25 tasks)."""
    return f"{namespace}:worker-progress"


def attempts_key(namespace: str, task_id: str) -> str:
    """The counter of a task's runs on workers."""
    return f"{namespace}:worker-attempts:{task_id}"


def docket_url(redis: Any) -> str:
    """A ``redis://`` URL for Docket to the server a redis-py client talks to."""
    kw = redis.connection_pool.connection_kwargs
    db = kw.get("db", 0)
    if kw.get("path"):
        return f"unix://{kw['path']}?db={db}"
    auth = ""
    if kw.get("password"):
        from urllib.parse import quote

        auth = f"{quote(str(kw.get('username') or ''))}:{quote(str(kw['password']))}@"
    scheme = "rediss" if kw.get("ssl") or "ssl_cert_reqs" in kw else "redis"
    return f"{scheme}://{auth}{kw.get('host', 'localhost')}:{kw.get('port', 6379)}/{db}"


async def tool_call(job: dict[str, Any]) -> None:
    """The Docket task of every job, as a front end adds it: a worker process registers its
    own function under this name (:func:`.worker.serve`: with the job's message, whose lease
    it keeps), so this one never runs."""
    raise RuntimeError("tool_call runs in a worker process (python -m PACKAGE.worker)")


class RemoteWork(HandedWork):
    """The work of a task whose tool runs on a worker: the engine stores the task through
    ``guard`` and calls :meth:`hand_over` instead of running it."""

    def __init__(
        self,
        offload: Offload,
        call: Mapping[str, Any],
        *,
        core: bool,
        attempts: int,
        connection: Any = None,
        client_capabilities: dict[str, Any] | None = None,
    ) -> None:
        self.offload = offload
        self.call = dict(call)
        self.core = core
        self.attempts = attempts
        self.connection = connection
        self.client_capabilities = client_capabilities

    async def __call__(self, tctx: Any) -> dict[str, Any]:
        raise InternalError(detail="this tool's work runs on workers, not in the front end")

    @property
    def guard(self) -> StoreGuard:
        return self.offload.guard

    async def hand_over(
        self, rec: TaskRecord, tool_error: TaskStatus, progress_token: str | int | None
    ) -> None:
        """Queue the task's job (the task is stored already)."""
        job = Job(
            task_id=rec.task_id,
            requestor=rec.requestor,
            face=rec.face,
            core=self.core,
            tool=str(self.call.get("name", "")),
            params=self.call,
            progress_token=progress_token,
            tool_error=tool_error.value,
            attempts=self.attempts,
            client_capabilities=self.client_capabilities,
        )
        offload = self.offload
        if self.core and progress_token is not None and self.connection is not None:
            offload.relay.follow(rec.task_id, self.connection, progress_token)
        await offload.add(job)


class ProgressRelay:
    """2025-11-25 progress of tools on workers, to the session that holds the token: each
    front end follows the tasks it handed over with a progress token, and forwards the
    reports workers publish on the channel as ``notifications/progress`` with that token."""

    def __init__(self, redis: Any, channel: str) -> None:
        self.redis = redis
        self.channel = channel
        self._targets: OrderedDict[str, tuple[Any, str | int]] = OrderedDict()

    def follow(self, task_id: str, connection: Any, token: str | int) -> None:
        targets = self._targets
        targets[task_id] = (connection, token)
        while len(targets) > RELAY_MAX:
            targets.popitem(last=False)

    def following(self, task_id: str) -> bool:
        return task_id in self._targets

    async def forward(self, raw: str | bytes) -> None:
        """One report from a worker: ``{"t": task, "p": progress, "n": total, "m": message}``,
        or ``{"t": task, "end": true}`` when the run ended."""
        try:
            msg = json.loads(raw)
            task_id = str(msg["t"])
        except (ValueError, KeyError, TypeError):
            log.warning("worker progress: not a report: %r", raw)
            return
        if msg.get("end"):
            self._targets.pop(task_id, None)
            return
        target = self._targets.get(task_id)
        if target is None:
            return  # another front end's session holds it (or none does any more)
        conn, token = target
        params: dict[str, Any] = {"progressToken": token, "progress": msg.get("p", 0)}
        if msg.get("n") is not None:
            params["total"] = msg["n"]
        if msg.get("m") is not None:
            params["message"] = msg["m"]
        try:
            await conn.notify(PROGRESS, params)
        except Exception:  # the session is gone: progress is informational
            self._targets.pop(task_id, None)

    async def listen(self) -> None:
        """Forward reports until cancelled; resubscribes after a Redis outage."""
        while True:
            pubsub = self.redis.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(self.channel)
                while True:
                    msg = await pubsub.get_message(timeout=1.0)
                    if msg is not None and msg.get("type") == "message":
                        await self.forward(msg["data"])
            except anyio.get_cancelled_exc_class():
                raise
            except Exception:
                log.warning("worker progress relay: Redis unavailable, retrying", exc_info=True)
                await anyio.sleep(1.0)
            finally:
                await aclose_quietly(pubsub)


class Offload:
    """A front end's hand-over of tasks to workers, over its engine's Redis store.

    ``async with offload:`` connects to Docket and runs the progress relay."""

    def __init__(self, store: TaskStore) -> None:
        from ..stores.redis import RedisTaskStore

        if not isinstance(store, RedisTaskStore):
            raise ValueError(
                "tools declared on_workers need a RedisTaskStore (the workers share it):"
                f" the engine's store is a {type(store).__name__}"
            )
        self.store = store
        ns = store.keys.ns
        #: creates tasks no front end owns (same Redis, same namespace; never started)
        self.unowned = RedisTaskStore(client=store.redis, namespace=ns, instance_id=WORKERS_OWNER)
        self.guard = StoreGuard(self.unowned)
        self.relay = ProgressRelay(store.redis, progress_channel(ns))
        self.docket_name = docket_name(ns)
        self._docket: Any = None
        self._tg: anyio.abc.TaskGroup | None = None

    async def __aenter__(self) -> Offload:
        from docket import Docket

        docket = Docket(name=self.docket_name, url=docket_url(self.store.redis))
        await docket.__aenter__()
        docket.register(tool_call)
        self._docket = docket
        tg = await open_group()
        self._tg = tg
        tg.start_soon(self.relay.listen)
        return self

    async def __aexit__(self, *exc: object) -> None:
        tg, self._tg = self._tg, None
        await close_group(tg)
        docket, self._docket = self._docket, None
        if docket is not None:
            await docket.__aexit__(None, None, None)

    async def add(self, job: Job) -> None:
        """Queue ``job`` (keyed by its task: a job is queued once)."""
        if self._docket is None:
            raise InternalError(detail="the hand-over to workers is not running (async with)")
        await self._docket.add(tool_call, key=job.task_id)(job.model_dump(mode="json"))
