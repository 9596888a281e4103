"""``TaskMetrics``: the tasks of a process in the Prometheus text format (``prometheus_client``,
the ``ops`` extra).

Why ``prometheus_client`` rather than OpenTelemetry: the target is one scrape format, and
the reference client renders it with no SDK pipeline, exporter thread or views to set up;
an increment is a lock and an add, cheap enough for every task (``benchmarks/bench_metrics.py``).

What is counted, and where it comes from (nothing is read from the store on a scrape):

- ``mcp_tasks_created_total{face,tool}`` and ``mcp_tasks_ended_total{face,tool,status}``,
  ``mcp_tasks_duration_seconds{face,tool,status}`` (created to terminal, from the task's
  own times) and ``mcp_tasks_input_required_seconds{face,tool}`` (each stretch a task
  waited for its requestor): the engine's ``on_created`` and ``on_status`` listeners, so the
  changes this process makes (a task another instance ends is counted there);
- ``mcp_tasks_expired_total{face}``: the engine's ``on_expired``;
- ``mcp_tasks_active{status}``: the tasks whose work runs in this process now (working, or
  waiting for input), read at scrape time;
- ``mcp_tasks_refused_total{limit}``: requests refused by the rate limit (``rate``, R-SEC-3)
  or the active-task limit (``active``, R-SEC-4), from the audit events;
- ``mcp_tasks_store_errors_total`` and ``mcp_tasks_store_retries_total{what}``: store calls
  that failed (answered "Task store unavailable") and retried (``reconnect``: the Redis
  client tried a command again; ``script``: Lua scripts Redis had lost were loaded again);
- ``mcp_tasks_notifications_dropped_total`` (status notifications dropped, a connection's
  backlog full) and ``mcp_tasks_task_endpoint_requests_total{outcome}`` (``replied`` or
  ``passed`` to the SDK), read at scrape time from the server.

Label values are bounded: ``face`` is one of the package's faces, ``tool`` one of the tools
the server declares as tasks (``task_support``; a bare engine: the first ``max_tools``
names seen), anything else ``(other)``, and ``(none)`` for a task that is not a tool call.

The counters are per process: the audit events and store hooks are process-wide, and every
engine attached adds to the same series.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Collection, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from ...protocol import FACES, INPUT_REQUIRED, TERMINAL, WORKING
from ...store import TaskRecord
from ..audit import sinks as audit_sinks
from ..observe import store_failed, store_retried

if TYPE_CHECKING:
    from ..engine import TaskEngine

__all__ = ["CONTENT_TYPE", "NONE", "OTHER", "TaskMetrics"]

CONTENT_TYPE = CONTENT_TYPE_LATEST
#: the label value of a name outside the bounded set, and of a task that is no tool call
OTHER = "(other)"
NONE = "(none)"
#: audit events counted as refusals, and their ``limit`` label
REFUSALS = {"rate_limited": "rate", "create_rejected": "active"}
DURATION_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 14400, 86400)
INPUT_BUCKETS = (0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600)
#: input_required stretches being timed at most (the oldest are dropped past it)
MAX_TIMED = 100_000


class _Attached:
    """One engine's part: its server's counters read at scrape time, its tools."""

    def __init__(
        self,
        engine: TaskEngine,
        sessions: Any,
        tools: Callable[[], Collection[str]] | None,
        endpoint: Callable[[], Any] | None,
    ) -> None:
        self.engine = engine
        self.sessions = sessions
        self.tools = tools
        self.endpoint = endpoint


class TaskMetrics:
    """Counters, histograms and gauges of tasks, in a registry of their own (``registry``):
    ``attach`` an engine (or ``attach_server`` an ``McpTasks``), ``render`` on a scrape,
    ``close`` to stop counting."""

    def __init__(self, registry: CollectorRegistry | None = None, *, max_tools: int = 64) -> None:
        self.registry = reg = registry if registry is not None else CollectorRegistry()
        self.max_tools = max_tools
        self._attached: list[_Attached] = []
        self._seen_tools: set[str] = set()
        self._labels: dict[tuple[str, str | None], tuple[str, str]] = {}
        self._children: dict[tuple[Any, ...], Any] = {}
        #: task ID -> when it began waiting for input (its store time)
        self._waiting: dict[str, float] = {}
        face_tool = ("face", "tool")
        self.created = Counter("mcp_tasks_created", "Tasks created", face_tool, registry=reg)
        self.ended = Counter(
            "mcp_tasks_ended", "Tasks that reached a terminal status", (*face_tool, "status"),
            registry=reg,
        )  # fmt: skip
        self.duration = Histogram(
            "mcp_tasks_duration_seconds", "From creation to a terminal status",
            (*face_tool, "status"), buckets=DURATION_BUCKETS, registry=reg,
        )  # fmt: skip
        self.input_wait = Histogram(
            "mcp_tasks_input_required_seconds", "Each stretch a task waited in input_required",
            face_tool, buckets=INPUT_BUCKETS, registry=reg,
        )  # fmt: skip
        self.expired = Counter("mcp_tasks_expired", "Tasks removed at ttl", ("face",), registry=reg)
        self.refused = Counter(
            "mcp_tasks_refused", "Requests refused by a limit (rate: R-SEC-3, active: R-SEC-4)",
            ("limit",), registry=reg,
        )  # fmt: skip
        self.store_errors = Counter(
            "mcp_tasks_store_errors", "Store calls that failed", registry=reg
        )
        self.store_retries = Counter(
            "mcp_tasks_store_retries", "Store calls retried", ("what",), registry=reg
        )
        reg.register(_Live(self))
        audit_sinks.append(self._audit)
        store_failed.append(self._store_failed)
        store_retried.append(self._store_retried)

    # ------------------------------------------------------------------ wiring
    def attach(
        self,
        engine: TaskEngine,
        *,
        sessions: Any = None,
        tools: Callable[[], Collection[str]] | Collection[str] | None = None,
        task_endpoint: Callable[[], Any] | None = None,
    ) -> None:
        """Count ``engine``'s tasks. ``tools``: the tool names kept as labels (a callable is
        asked again on every task it does not know); ``sessions``: an object with
        ``notifications_dropped``; ``task_endpoint``: returns one with ``replied`` and
        ``passed`` (or None)."""
        names = tools if tools is None or callable(tools) else _fixed(frozenset(tools))
        self._attached.append(_Attached(engine, sessions, names, task_endpoint))
        engine.on_created.append(self._on_created)
        engine.on_status.append(self._on_status)
        engine.on_expired.append(self._on_expired)

    def attach_server(self, tasks: Any) -> None:
        """Count the tasks of an ``McpTasks`` (its engine, declared tools, sessions and task
        endpoint)."""
        ref = weakref.ref(tasks)

        def endpoint() -> Any:
            server = ref()
            return None if server is None else server.task_endpoint

        self.attach(
            tasks.engine,
            sessions=tasks.sessions,
            tools=lambda: tasks.task_support.keys(),
            task_endpoint=endpoint,
        )

    def close(self) -> None:
        """Stop counting (the process-wide hooks and every engine's listeners)."""
        _discard(audit_sinks, self._audit)
        _discard(store_failed, self._store_failed)
        _discard(store_retried, self._store_retried)
        for att in self._attached:
            _discard(att.engine.on_created, self._on_created)
            _discard(att.engine.on_status, self._on_status)
            _discard(att.engine.on_expired, self._on_expired)
        self._attached.clear()

    def render(self) -> bytes:
        """The text format of every metric (``CONTENT_TYPE``)."""
        return generate_latest(self.registry)

    # ------------------------------------------------------------------ labels
    def labels(self, face: str, tool: str | None) -> tuple[str, str]:
        """The bounded ``(face, tool)`` label values of a task."""
        key = (face, tool)
        got = self._labels.get(key)
        if got is not None:
            return got
        got = (face if face in FACES else OTHER, NONE if tool is None else self._tool(tool))
        if len(self._labels) < 4096:
            self._labels[key] = got
        return got

    def _tool(self, tool: str) -> str:
        declared = [a.tools for a in self._attached if a.tools is not None]
        if declared:
            return tool if any(tool in names() for names in declared) else OTHER
        if tool in self._seen_tools or len(self._seen_tools) < self.max_tools:
            self._seen_tools.add(tool)
            return tool
        return OTHER

    def _child(self, metric: Any, *values: str) -> Any:
        key = (id(metric), *values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    # ------------------------------------------------------------------ listeners
    def _on_created(self, rec: TaskRecord) -> None:
        self._child(self.created, *self.labels(rec.face, rec.tool)).inc()

    async def _on_status(self, rec: TaskRecord) -> None:
        face, tool = self.labels(rec.face, rec.tool)
        since = self._waiting.pop(rec.task_id, None)
        if since is not None:
            self._child(self.input_wait, face, tool).observe(max(0.0, rec.last_updated_at - since))
        status = rec.status
        if status == INPUT_REQUIRED:
            waiting = self._waiting
            if len(waiting) >= MAX_TIMED:
                del waiting[next(iter(waiting))]
            waiting[rec.task_id] = rec.last_updated_at
        elif status in TERMINAL:
            value = status.value
            self._child(self.ended, face, tool, value).inc()
            took = max(0.0, rec.last_updated_at - rec.created_at)
            self._child(self.duration, face, tool, value).observe(took)

    def _on_expired(self, rec: TaskRecord) -> None:
        self._waiting.pop(rec.task_id, None)
        self._child(self.expired, self.labels(rec.face, None)[0]).inc()

    def _audit(self, event: str, requestor: str, task_id: str | None, fields: Any) -> None:
        limit = REFUSALS.get(event)
        if limit is not None:
            self._child(self.refused, limit).inc()

    def _store_failed(self, exc: BaseException) -> None:
        self.store_errors.inc()

    def _store_retried(self, what: str) -> None:
        self._child(self.store_retries, what).inc()


def _discard(listeners: list[Any], fn: Any) -> None:
    if fn in listeners:
        listeners.remove(fn)


def _fixed(names: frozenset[str]) -> Callable[[], Collection[str]]:
    return lambda: names


class _Live:
    """What is read at scrape time: running work, dropped notifications, the task endpoint."""

    def __init__(self, metrics: TaskMetrics) -> None:
        self._metrics = weakref.ref(metrics)

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        metrics = self._metrics()
        attached = [] if metrics is None else metrics._attached
        counts = {WORKING.value: 0, INPUT_REQUIRED.value: 0}
        dropped = 0
        outcomes = {"replied": 0, "passed": 0}
        for att in attached:
            for run in list(att.engine.runs.active.values()):
                if run.busy:
                    counts[(INPUT_REQUIRED if run.pending else WORKING).value] += 1
            dropped += int(getattr(att.sessions, "notifications_dropped", 0) or 0)
            endpoint = att.endpoint() if att.endpoint is not None else None
            for outcome in outcomes:
                outcomes[outcome] += int(getattr(endpoint, outcome, 0) or 0)
        active = GaugeMetricFamily(
            "mcp_tasks_active", "Tasks whose work runs in this process", labels=("status",)
        )
        for status, n in counts.items():
            active.add_metric((status,), n)
        yield active
        yield CounterMetricFamily(
            "mcp_tasks_notifications_dropped",
            "Status notifications dropped (a connection's backlog was full)",
            value=dropped,
        )
        served = CounterMetricFamily(
            "mcp_tasks_task_endpoint_requests",
            "Requests of the task endpoint: answered there, or passed to the SDK",
            labels=("outcome",),
        )
        for outcome, n in outcomes.items():
            served.add_metric((outcome,), n)
        yield served
