"""``TaskMetrics``: the tasks of a process in the Prometheus text format (``prometheus_client``,
the ``ops`` extra).

Why ``prometheus_client`` rather than OpenTelemetry: the target is one scrape format, and
the reference client renders it with no SDK pipeline, exporter thread or views to set up.
On a task's path nothing of it runs: the counts are plain integers in dicts, bumped by the
listeners on the engine's event loop (about a microsecond a task), and handed to
``prometheus_client``'s metric families only when scraped (``benchmarks/bench_metrics.py``).

What is counted, and where it comes from (nothing is read from the store on a scrape):

- ``mcp_tasks_created_total{face,tool}`` and ``mcp_tasks_ended_total{face,tool,status}``,
  ``mcp_tasks_duration_seconds{face,tool,status}`` (created to terminal, from the task's
  own times) and ``mcp_tasks_input_required_seconds{face,tool}`` (each stretch a task
  waited for its requestor): the engine's events (``on_created``, ``on_changed``: observers
  called inline, never behind a notification), so the changes this process makes (a task
  another instance ends is counted there);
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

import math
import weakref
from bisect import bisect_left
from collections.abc import Callable, Collection, Iterator
from typing import TYPE_CHECKING, Any

from ..parts import require

require("ops", __name__, "prometheus_client")

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry  # noqa: E402
from prometheus_client.exposition import generate_latest  # noqa: E402
from prometheus_client.metrics_core import (  # noqa: E402
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from ...protocol import FACES, INPUT_REQUIRED, TERMINAL, WORKING  # noqa: E402
from ...store import TaskRecord  # noqa: E402
from ..engine.audit import sinks as audit_sinks  # noqa: E402
from ..observe import store_failed, store_retried  # noqa: E402

if TYPE_CHECKING:
    from ..engine.task_engine import TaskEngine

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


class _Histogram:
    """One histogram series: per-bucket counts (cumulated on a scrape), sum, count."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value

    def buckets(self) -> list[tuple[str, float]]:
        out, total = [], 0
        for bound, n in zip((*self.bounds, math.inf), self.counts, strict=True):
            total += n
            out.append(("+Inf" if bound == math.inf else repr(float(bound)), float(total)))
        return out


class TaskMetrics:
    """Counters, histograms and gauges of tasks, in a registry of their own (``registry``):
    ``attach`` an engine (or ``attach_server`` an ``McpTasks``), ``render`` on a scrape,
    ``close`` to stop counting. Counted on one event loop (the engines' own)."""

    def __init__(self, registry: CollectorRegistry | None = None, *, max_tools: int = 64) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.max_tools = max_tools
        self._attached: list[_Attached] = []
        self._seen_tools: set[str] = set()
        self._labels: dict[tuple[str, str | None], tuple[str, str]] = {}
        #: task ID -> when it began waiting for input (its store time)
        self._waiting: dict[str, float] = {}
        self.created: dict[tuple[str, str], int] = {}
        self.ended: dict[tuple[str, str, str], int] = {}
        self.duration: dict[tuple[str, str, str], _Histogram] = {}
        self.input_wait: dict[tuple[str, str], _Histogram] = {}
        self.expired: dict[str, int] = {}
        self.refused: dict[str, int] = {}
        self.store_errors = 0
        self.store_retries: dict[str, int] = {}
        self.registry.register(_Live(self))
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
        engine.events.on_changed.append(self._on_status)
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
            _discard(att.engine.events.on_changed, self._on_status)
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

    # ------------------------------------------------------------------ listeners
    def _on_created(self, rec: TaskRecord) -> None:
        key = self.labels(rec.face, rec.tool)
        created = self.created
        created[key] = created.get(key, 0) + 1

    def _on_status(self, rec: TaskRecord) -> None:
        status = rec.status
        waiting = self._waiting
        if waiting:
            since = waiting.pop(rec.task_id, None)
            if since is not None:
                key = self.labels(rec.face, rec.tool)
                hist = self.input_wait.get(key)
                if hist is None:
                    hist = self.input_wait[key] = _Histogram(INPUT_BUCKETS)
                hist.observe(max(0.0, rec.last_updated_at - since))
        if status in TERMINAL:
            face, tool = self.labels(rec.face, rec.tool)
            ended = (face, tool, status.value)
            self.ended[ended] = self.ended.get(ended, 0) + 1
            hist = self.duration.get(ended)
            if hist is None:
                hist = self.duration[ended] = _Histogram(DURATION_BUCKETS)
            hist.observe(max(0.0, rec.last_updated_at - rec.created_at))
        elif status == INPUT_REQUIRED:
            if len(waiting) >= MAX_TIMED:
                del waiting[next(iter(waiting))]
            waiting[rec.task_id] = rec.last_updated_at

    def _on_expired(self, rec: TaskRecord) -> None:
        self._waiting.pop(rec.task_id, None)
        face = self.labels(rec.face, None)[0]
        self.expired[face] = self.expired.get(face, 0) + 1

    def _audit(self, event: str, requestor: str, task_id: str | None, fields: Any) -> None:
        limit = REFUSALS.get(event)
        if limit is not None:
            self.refused[limit] = self.refused.get(limit, 0) + 1

    def _store_failed(self, exc: BaseException) -> None:
        self.store_errors += 1

    def _store_retried(self, what: str) -> None:
        self.store_retries[what] = self.store_retries.get(what, 0) + 1


def _discard(listeners: list[Any], fn: Any) -> None:
    if fn in listeners:
        listeners.remove(fn)


def _fixed(names: frozenset[str]) -> Callable[[], Collection[str]]:
    return lambda: names


def _counter(name: str, doc: str, labels: tuple[str, ...], values: dict[Any, int]) -> Metric:
    family = CounterMetricFamily(name, doc, labels=labels)
    for key, n in values.items():
        family.add_metric(key if isinstance(key, tuple) else (key,), n)
    return family


def _histogram(
    name: str, doc: str, labels: tuple[str, ...], values: dict[Any, _Histogram]
) -> Metric:
    family = HistogramMetricFamily(name, doc, labels=labels)
    for key, hist in values.items():
        family.add_metric(key, hist.buckets(), hist.sum)
    return family


class _Live:
    """Every series, made on a scrape from the counts (and what is read then: running
    work, dropped notifications, the task endpoint)."""

    def __init__(self, metrics: TaskMetrics) -> None:
        self._metrics = weakref.ref(metrics)

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        m = self._metrics()
        if m is None:
            return
        face_tool = ("face", "tool")
        yield _counter("mcp_tasks_created", "Tasks created", face_tool, dict(m.created))
        yield _counter(
            "mcp_tasks_ended", "Tasks that reached a terminal status",
            (*face_tool, "status"), dict(m.ended),
        )  # fmt: skip
        yield _histogram(
            "mcp_tasks_duration_seconds", "From creation to a terminal status",
            (*face_tool, "status"), dict(m.duration),
        )  # fmt: skip
        yield _histogram(
            "mcp_tasks_input_required_seconds", "Each stretch a task waited in input_required",
            face_tool, dict(m.input_wait),
        )  # fmt: skip
        yield _counter("mcp_tasks_expired", "Tasks removed at ttl", ("face",), dict(m.expired))
        yield _counter(
            "mcp_tasks_refused", "Requests refused by a limit (rate: R-SEC-3, active: R-SEC-4)",
            ("limit",), dict(m.refused),
        )  # fmt: skip
        yield CounterMetricFamily(
            "mcp_tasks_store_errors", "Store calls that failed", value=m.store_errors
        )
        yield _counter(
            "mcp_tasks_store_retries", "Store calls retried", ("what",), dict(m.store_retries)
        )
        yield from _read_live(m._attached)


def _read_live(attached: list[_Attached]) -> Iterator[Metric]:
    counts = {WORKING.value: 0, INPUT_REQUIRED.value: 0}
    dropped = 0
    outcomes = {"replied": 0, "passed": 0}
    for att in attached:
        working, waiting = att.engine.runs.counts()
        counts[WORKING.value] += working
        counts[INPUT_REQUIRED.value] += waiting
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
    yield _counter(
        "mcp_tasks_task_endpoint_requests",
        "Requests of the task endpoint: answered there, or passed to the SDK",
        ("outcome",),
        outcomes,
    )
