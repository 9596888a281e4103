"""A worker process: runs the task work of tools declared ``on_workers`` (:mod:`.offload`).

    python -m PACKAGE.worker --store redis://HOST:PORT/DB[?namespace=NS&lease=S] MODULE:ATTR

``MODULE:ATTR`` is your app: an ``McpTasks``, an ``mcp`` ``Server``/``MCPServer``, or a
callable of no arguments returning one (or a tuple holding one). The worker imports it and
runs each job's ``tools/call`` through the server's own pipeline (its validation,
middleware, the tool, its result checks), with a task context whose

- input requests (elicitation, sampling) go through the shared store's input hand-over:
  the ``tasks/result`` stream of any front end delivers them on 2025-11-25, ``tasks/get``
  lists them and ``tasks/update`` answers them on the extension's face;
- progress becomes progress notifications to the original token (2025-11-25, through the
  front end whose session holds it) or the task's ``statusMessage`` (the extension);
- cancellation (``tasks/cancel`` on any front end) stops the tool, woken by the store's
  change events (a bounded fallback poll otherwise);
- outcome is stored only while the task is not terminal: a second run never gives a
  second outcome.

Each job is counted in the store before it runs. A job Docket delivers again because the
worker running it died runs again while the tool's attempts (1 + ``retries``) last;
otherwise its task fails with a ``statusMessage`` saying the worker stopped.

A run is alive while its worker is (:mod:`.leases`): a thread of the worker's own, not
its event loop, renews the lease (Docket's claim on the job's message) of every job the
worker runs, so a tool that holds the loop (a blocking call inside an ``async`` tool) keeps
its job however long it runs. A worker that stops altogether (``SIGSTOP``, a frozen machine)
renews nothing: past the redelivery timeout its job goes to another worker, as a dead one's
does, and counts as one of its attempts. When the stopped worker comes back, its run is
another's: the first turn of its event loop finds the job counted again and stops the run
(a cancel: at most the one step of the tool already due when it resumed runs first),
storing no outcome; a run that ends first has its outcome discarded all the same (the count
is read again before it is stored), and the job's message is left to the worker that runs
it now.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import logging
import signal
import sys
from collections.abc import Callable, Mapping
from datetime import timedelta
from functools import partial
from typing import Any, cast

import anyio
import anyio.lowlevel
from pydantic import ValidationError

from ...core.meta import RELATED_TASK_KEY
from ...errors import InternalError, MethodNotFound, TaskError
from ...protocol import FAILED, NON_TERMINAL, TERMINAL, TaskStatus
from ..engine.config import EngineConfig
from ..engine.runs import TaskContext, Work
from ..engine.task_engine import TaskEngine
from ..logs import PACKAGE, logger
from ..sdk import (
    connection_from_envelope,
    lowlevel_server,
    server_of,
    tidy_argument_errors,
    to_sdk_error,
)
from ..sdk.check import require_extra
from ..serve.offload import Job, attempts_key, docket_name, docket_url, progress_channel, tool_call
from ..serve.outbound import INPUT_METHODS, TaskDispatchContext
from ..serve.router import run_call
from ..serve.server import McpTasks
from ..serve.tool_runner import tool_runner
from .leases import Held, JobLeases, job_leases

__all__ = ["WorkerRuntime", "load_app", "main", "serve"]

log = logger("worker")

#: statusMessage of a task whose worker died and whose tool is not retried
NOT_RETRIED_MESSAGE = (
    "Task failed: the worker running it stopped before it finished (the tool is not retried)"
)
#: how long a task's run counter is kept past its task's ttl (seconds)
COUNTER_GRACE_S = 3600
#: Docket's default redelivery timeout is 5 minutes; a task waits this long for another
#: worker after its worker died
DEFAULT_REDELIVERY_S = 30.0


def exhausted_message(attempts: int) -> str:
    return f"Task failed: the workers running it stopped before it finished ({attempts} attempts)"


def load_app(spec: str) -> Any:
    """``MODULE:ATTR`` imported: the low-level ``Server`` of the app it names."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"app {spec!r}: expected MODULE:ATTR (e.g. myapp.server:tasks)")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"app {spec!r}: cannot import {module_name} ({exc})") from None
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"app {spec!r}: {module_name} has no attribute {attr}")
        obj = getattr(obj, part)
    found = _server_of(obj)
    if found is None and callable(obj):
        found = _server_of(obj())
    if found is None:
        raise ValueError(
            f"app {spec!r}: expected an McpTasks, an mcp Server or MCPServer, or a callable"
            f" returning one; got {type(obj).__name__}"
        )
    return found


def _server_of(obj: Any) -> Any | None:
    if isinstance(obj, tuple):
        for item in obj:
            if (found := _server_of(item)) is not None:
                return found
        return None
    if isinstance(obj, McpTasks):
        return obj.server
    if server_of(obj) is not None:
        tidy_argument_errors(obj)
        return lowlevel_server(obj)
    return None


class WorkerOutbound(TaskDispatchContext):
    """The tool's channel to its requestor on a worker: input requests through the shared
    store (stamped with the related-task ``_meta`` on 2025-11-25, R-INPUT-2), progress to
    the front end's session (2025-11-25) or as ``statusMessage`` (the extension, X-NOTIF-7);
    other requests are refused, other notifications dropped (no session here)."""

    def __init__(self, tctx: TaskContext, job: Job, redis: Any, channel: str) -> None:
        super().__init__(tctx, None)
        self.job = job
        self.redis = redis
        self.channel = channel

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: Any = None
    ) -> dict[str, Any]:
        if method not in INPUT_METHODS:
            raise to_sdk_error(MethodNotFound(detail=f"{method} cannot be sent from a worker"))
        body = dict(params or {})
        if self.job.core:
            meta = dict(body.get("_meta") or {})
            meta[RELATED_TASK_KEY] = {"taskId": self.tctx.task_id}
            body["_meta"] = meta
        try:
            return await self.tctx.request_input(method, body)
        except TaskError as exc:
            raise to_sdk_error(exc) from None

    async def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        if not self.job.core:
            await self.tctx.report_progress(progress, total, message)
            return
        if self.job.progress_token is None:
            return
        report = {"t": self.tctx.task_id, "p": progress, "n": total, "m": message}
        try:
            await self.redis.publish(self.channel, json.dumps(report))
        except Exception:  # informational: a lost report never fails the work
            log.warning("task %s: progress not relayed", self.tctx.task_id, exc_info=True)


class WorkerRuntime:
    """Runs jobs in this process: the engine on the shared store, the app's server."""

    def __init__(self, engine: TaskEngine, server: Any, lifespan_state: Any) -> None:
        from ..stores.redis import RedisTaskStore

        store = engine.store
        if not isinstance(store, RedisTaskStore):
            raise ValueError("a worker needs a RedisTaskStore")
        self.engine = engine
        self.store = store
        self.server = server
        self.lifespan_state = lifespan_state
        self.ns = store.keys.ns
        self.channel = progress_channel(self.ns)
        #: jobs run by this process (for tests and logs)
        self.ran = 0
        #: the asyncio tasks (Docket's, one a job) in :meth:`run` now
        self._jobs: set[asyncio.Task[Any]] = set()
        #: the leases of the jobs running here, renewed off the event loop (set by ``serve``)
        self.leases: JobLeases | None = None
        self._lapse_checked = False

    def stop_jobs(self) -> None:
        """Cancel the jobs running here now, as Docket does on a second cancel of its loop:
        each run stops storing no outcome, and Docket, shutting down, leaves the job's
        message pending for another worker. Done here too because two cancels of Docket's
        loop that land before its drain begins count as one: it would drain."""
        for task in list(self._jobs):
            task.cancel()

    async def run(self, raw: dict[str, Any], message_id: Any = None) -> bool:
        """Run one job (``message_id``: its Docket message, whose lease :attr:`leases`
        renews); False when another worker's run of it took over meanwhile (its message is
        that run's: leave it alone)."""
        # the asyncio task Docket runs the job in (a coroutine awaited in a task: never None)
        task = cast("asyncio.Task[Any]", asyncio.current_task())
        self._jobs.add(task)
        try:
            return await self._run_raw(raw, message_id)
        finally:
            self._jobs.discard(task)

    async def _run_raw(self, raw: dict[str, Any], message_id: Any) -> bool:
        try:
            job = Job.model_validate(raw)
        except ValidationError as exc:
            log.error("dropped a job that is not one: %s", exc)
            return True
        try:
            return await self._run(job, message_id)
        finally:
            if job.core and job.progress_token is not None:
                with anyio.CancelScope(shield=True):
                    try:
                        end = json.dumps({"t": job.task_id, "end": True})
                        await self.store.redis.publish(self.channel, end)
                    except Exception:
                        pass

    async def _run(self, job: Job, message_id: Any) -> bool:
        engine, redis = self.engine, self.store.redis
        key = attempts_key(self.ns, job.task_id)
        rec = await engine.guard.get(job.task_id)
        if rec is None or rec.status in TERMINAL:
            log.info("task %s: ended before a worker took it", job.task_id)
            return True
        ttl_s = None if rec.ttl_ms is None else rec.ttl_ms // 1000
        pipe = redis.pipeline(transaction=True)
        pipe.incr(key)
        pipe.expire(key, (ttl_s or 0) + COUNTER_GRACE_S)
        attempt = int((await pipe.execute())[0])
        if attempt > job.attempts:
            message = NOT_RETRIED_MESSAGE if job.attempts == 1 else exhausted_message(job.attempts)
            log.warning("task %s (%s): %s", job.task_id, job.tool, message)
            err = InternalError(message=message)
            new = await engine.transition(
                job.task_id, FAILED, expected=NON_TERMINAL,
                status_message=message, error=err.to_error(),
            )  # fmt: skip
            if new is not None:
                engine.events.status(new)
            return True
        log.info(
            "task %s: running %s (attempt %d of %d)", job.task_id, job.tool, attempt, job.attempts
        )
        self.ran += 1
        held = Held(job.task_id, message_id, attempt)
        if self.leases is not None and message_id is not None:
            self.leases.hold(held)
        try:
            final = await engine.runs.adopt(
                rec,
                self.work(job, held),
                tool_error=TaskStatus(job.tool_error),
                progress_token=job.progress_token,
            )
        finally:
            if self.leases is not None:
                self.leases.release(held)
        if held.superseded:
            log.info("task %s: run ended (superseded: no outcome stored)", job.task_id)
            return False
        ended = final.status.value if final is not None else "ended elsewhere"
        log.info("task %s: run ended (%s)", job.task_id, ended)
        return True

    def watch(self, loop: asyncio.AbstractEventLoop, every_s: float) -> Callable[[], None]:
        """:meth:`check_leases` every ``every_s`` on the event loop, until the function it
        returns is called."""
        armed: list[asyncio.TimerHandle] = []

        def tick() -> None:
            self.check_leases()
            armed[0] = loop.call_later(every_s, tick)

        armed.append(loop.call_later(every_s, tick))
        return lambda: armed[0].cancel()

    def check_leases(self) -> None:
        """Stop the runs another worker's took over. When the lease thread renewed nothing
        for a while (the process was stopped), the leases are checked here first, once per
        such lapse: this timer, as overdue as the tools' own, runs with them as the process
        resumes, not after the lease thread's next round trip."""
        leases = self.leases
        if leases is None:
            return
        if not leases.lapsed():
            self._lapse_checked = False
        elif not self._lapse_checked:
            self._lapse_checked = True
            try:
                leases.beat()
            except Exception as exc:  # the lease thread says it again, throttled
                log.warning("job leases not checked after a stop (%s)", exc)
        for held in leases.held():
            if held.superseded:
                self.superseded(held)

    def superseded(self, held: Held) -> None:
        """Stop the run of ``held``: another worker runs its task now (on the event loop;
        once per run)."""
        held.superseded = True
        if held.stopped:
            return
        held.stopped = True
        log.warning(
            "task %s: another worker runs it now (this worker's run %d was stopped or held past"
            " the redelivery timeout): stopping this run, its outcome discarded",
            held.task_id, held.attempt,
        )  # fmt: skip
        self.engine.runs.stop(held.task_id)

    async def _fence(self, held: Held) -> None:
        """Before a run's outcome is stored: when another run of its task began since (the
        count read again), the run is stopped here and no outcome of it is stored."""
        if not held.superseded:
            try:
                count = await self.store.redis.get(attempts_key(self.ns, held.task_id))
            except Exception:  # the store's own log says why; the outcome's write tells
                return
            if count is None or int(count) == held.attempt:
                return
        self.superseded(held)
        await anyio.lowlevel.checkpoint()  # the run's cancel lands here

    def work(self, job: Job, held: Held | None = None) -> Work:
        """The job's tool through the server's pipeline, with a worker's task context; with
        ``held``, fenced against a newer run of its task (:meth:`_fence`)."""
        conn = connection_from_envelope(job.face, None, job.client_capabilities)
        run_tool = tool_runner(self.server, conn, self.lifespan_state)
        redis, channel = self.store.redis, self.channel

        async def work(tctx: TaskContext) -> dict[str, Any]:
            outbound = WorkerOutbound(tctx, job, redis, channel)
            try:
                result = await run_call(run_tool, outbound, job.params, core=job.core)
            except Exception:
                if held is not None:
                    await self._fence(held)
                raise
            if held is not None:
                await self._fence(held)
            return result

        return work


async def serve(
    app: str | Any,
    store_url: str,
    *,
    concurrency: int = 10,
    redelivery_s: float = DEFAULT_REDELIVERY_S,
    config: EngineConfig | None = None,
    ready: anyio.Event | None = None,
    handle_signals: bool = False,
) -> None:
    """Run jobs until cancelled, or (``handle_signals``) until SIGTERM or SIGINT. ``app``:
    ``MODULE:ATTR``, or the app itself (as :func:`load_app` accepts it).

    The first signal stops taking jobs and lets the tools running here finish (Docket's
    drain); a second one stops them at once without storing their outcome: Docket leaves
    their jobs pending, and another worker takes them after the redelivery timeout (a run
    that counts as one of the tool's attempts). Cancelled from outside, the same at once."""
    from docket import Docket, Execution, Worker
    from docket.dependencies import AdmissionBlocked, CurrentExecution

    from ..stores.redis import RedisTaskStore

    server = load_app(app) if isinstance(app, str) else _server_of(app)
    if server is None:
        raise ValueError(f"app: expected an McpTasks or an mcp server, got {type(app).__name__}")
    store = RedisTaskStore.from_url(store_url)
    engine = TaskEngine(store, config)
    try:
        async with engine, server.lifespan(server) as state:
            runtime = WorkerRuntime(engine, server, state)
            name, url = docket_name(store.keys.ns), docket_url(store.redis)

            current = CurrentExecution()  # Docket's dependency: the job's own Execution

            async def run_job(job: dict[str, Any], execution: Execution = current) -> None:
                """The worker's side of the front ends' job (registered under its name)."""
                if not await runtime.run(job, execution.message_id):
                    # another worker's run took it over: Docket neither acks nor fails it
                    raise AdmissionBlocked(execution, "a newer run of its task", handled=True)

            async with Docket(name=name, url=url) as docket:
                docket.register(run_job, names=[tool_call.__name__])
                try:
                    async with Worker(
                        docket,
                        concurrency=concurrency,
                        redelivery_timeout=timedelta(seconds=redelivery_s),
                        schedule_automatic_tasks=False,
                    ) as worker:
                        loop = asyncio.get_running_loop()
                        counter = partial(attempts_key, store.keys.ns)
                        leases = job_leases(docket, worker, url, counter, redelivery_s)
                        leases.superseded = lambda h: _on_loop(loop, runtime.superseded, h)
                        runtime.leases = leases
                        leases.start()
                        unwatch = runtime.watch(loop, leases.interval_s)
                        try:
                            log.info("worker %s: running jobs from %s", worker.name, store.where)
                            if ready is not None:
                                ready.set()
                            await _run_worker(worker, handle_signals, runtime.stop_jobs)
                        finally:
                            unwatch()
                            runtime.leases = None
                            leases.close()
                finally:
                    with anyio.CancelScope(shield=True):
                        await _leave_runs(engine)
    finally:
        with anyio.CancelScope(shield=True):
            await store.close()


def _on_loop(loop: asyncio.AbstractEventLoop, fn: Callable[[Held], None], held: Held) -> None:
    """``fn(held)`` on ``loop`` as soon as it turns (from another thread)."""
    loop.call_soon_threadsafe(fn, held)


async def _leave_runs(engine: TaskEngine, grace_s: float = 10.0) -> None:
    """Stop the tools still running here without storing an outcome (their jobs stay
    pending in Docket for another worker); wait up to ``grace_s`` for them to stop."""
    await engine.runs.leave(grace_s)


async def _run_worker(worker: Any, handle_signals: bool, stop_jobs: Callable[[], None]) -> None:
    """Docket's loop as its own asyncio task, cancelled once per signal: Docket drains its
    running jobs on the first cancel, and cancels them on the next (``stop_jobs`` too)."""
    loop = asyncio.ensure_future(worker.run_forever())
    if not handle_signals:
        await loop
        return
    async with anyio.create_task_group() as tg:
        tg.start_soon(_on_signals, loop, stop_jobs)
        try:
            await asyncio.wait([loop])  # the signals cancel it, not this wait
        finally:
            tg.cancel_scope.cancel()
    if not loop.cancelled():
        loop.result()  # Docket's own failure, if any


async def _on_signals(loop: asyncio.Future[None], stop_jobs: Callable[[], None]) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        drain = True
        async for signum in signals:
            name = signal.Signals(signum).name
            if drain:
                log.warning(
                    "worker stopping (%s): taking no more jobs, the tools running here finish"
                    " (again: stop them now, their jobs go back to the queue)",
                    name,
                )
            else:
                log.warning("worker stopping now (%s): its jobs go back to the queue", name)
                stop_jobs()
            drain = False
            loop.cancel()


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    package = PACKAGE
    parser = argparse.ArgumentParser(
        prog=f"python -m {package}.worker",
        description="Run the task work of tools declared on_workers (jobs from Docket).",
    )
    parser.add_argument("app", metavar="MODULE:ATTR", help="the app: McpTasks, server or factory")
    parser.add_argument(
        "--store",
        required=True,
        metavar="URL",
        help="the front ends' store: redis://HOST:PORT/DB[?namespace=NS&lease=SECONDS]",
    )
    parser.add_argument(
        "--concurrency", type=int, default=10, metavar="N", help="jobs run at once (default 10)"
    )
    parser.add_argument(
        "--redelivery-timeout",
        type=float,
        default=DEFAULT_REDELIVERY_S,
        metavar="SECONDS",
        help="how long a dead worker's job waits before another worker takes it"
        f" (default {DEFAULT_REDELIVERY_S:g})",
    )
    args = parser.parse_args(argv)
    if not str(args.store).startswith(("redis://", "rediss://", "unix://")):
        parser.error(f"--store: expected redis://HOST:PORT/DB, not {args.store!r}")
    if args.concurrency < 1:
        parser.error("--concurrency: N >= 1")
    if not args.redelivery_timeout > 0:
        parser.error("--redelivery-timeout: SECONDS > 0")
    require_extra(parser.prog, "workers", "a worker")
    try:
        args.server = load_app(args.app)
    except ValueError as exc:
        parser.error(str(exc))
    return args


def main(argv: list[str] | None = None) -> None:
    args = _parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    # One line per event, whatever handler the app's imports put on the root logger.
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    # Docket logs every job's start and end at INFO (through the app's handlers, Rich for an
    # MCPServer): a cost per job that its own lines above already cover.
    logging.getLogger("docket").setLevel(logging.WARNING)
    try:
        anyio.run(
            lambda: serve(
                args.server,
                args.store,
                concurrency=args.concurrency,
                redelivery_s=args.redelivery_timeout,
                handle_signals=True,
            )
        )
    except KeyboardInterrupt:
        pass
