"""OpenTelemetry and a task's tool run: the SDK wraps each request it serves in a span
(its ``OpenTelemetryMiddleware``). A task's tool runs through the SDK's own pipeline, and
keeps that span when the application configured a tracer provider; without one the span
would be a no-op, and the run leaves it out (the rest of the pipeline runs as the SDK
composes it: validation, the server's other middleware, the tool's context)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from mcp.shared import _otel as sdk_otel
from opentelemetry import trace
from opentelemetry.util.types import Attributes

from testkit.doors import ENDPOINT
from testkit.inproc import serving
from testkit.procs import python_env
from testkit.sec_harness import RawHttp


class _Recorded(trace.NonRecordingSpan):
    """A span whose name and attributes are kept by its provider (the API has no SDK
    span; its non-recording one carries an invalid context, which is enough here)."""

    def __init__(self, name: str, attributes: Attributes, log: list[tuple[str, Any]]) -> None:
        super().__init__(trace.INVALID_SPAN_CONTEXT)
        log.append((name, dict(attributes or {})))


class _Tracer(trace.Tracer):
    def __init__(self, log: list[tuple[str, Any]]) -> None:
        self.log = log

    def start_span(self, name: str, *args: Any, attributes: Attributes = None, **kw: Any) -> Any:
        return _Recorded(name, attributes, self.log)

    def start_as_current_span(self, name: str, *args: Any, **kw: Any) -> Any:
        return trace.use_span(self.start_span(name, *args, **kw), end_on_exit=True)


class RecordingProvider(trace.TracerProvider):
    """A tracer provider that records the name and attributes of every span started."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, Any]] = []

    def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
        return _Tracer(self.spans)


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[RecordingProvider]:
    """A tracer provider configured for this test only (the API sets one once per process:
    the global and the SDK's proxy tracer are patched back after the test)."""
    recording = RecordingProvider()
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", recording)
    monkeypatch.setattr(sdk_otel, "_tracer", trace.get_tracer("mcp-python-sdk"))
    yield recording


def _tool_spans(spans: Sequence[tuple[str, Any]]) -> list[tuple[str, Any]]:
    return [s for s in spans if s[0] == "tools/call slow_compute"]


def _one_task(url: str) -> str:
    with RawHttp(url) as c:
        task_id = c.create("slow_compute", {"seconds": 0})
        result = c.ok("tasks/result", {"taskId": task_id})
    text: str = result["content"][0]["text"]
    return text


def test_a_task_run_keeps_the_sdks_span_when_tracing_is_configured(
    front_door: str, provider: RecordingProvider
) -> None:
    with serving(front_door) as srv:
        assert _one_task(srv.url).startswith("done after 0s")
    spans = _tool_spans(provider.spans)
    assert spans, f"no tools/call span among {[s[0] for s in provider.spans]}"
    assert spans[-1][1]["gen_ai.tool.name"] == "slow_compute"
    assert spans[-1][1]["mcp.method.name"] == "tools/call"


def check_without_a_tracer_provider() -> None:
    """At the task endpoint (the SDK's own door serves the task's ``tools/call`` request
    itself, in the request's span)."""
    import mcp.server._otel as server_otel

    started: list[str] = []
    real = sdk_otel.otel_span

    def counted(name: str, **kw: Any) -> Any:
        started.append(name)
        return real(name, **kw)

    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    server_otel.otel_span = counted
    with serving(ENDPOINT) as srv:
        assert _one_task(srv.url).startswith("done after 0s")
    # the requests the SDK serves (initialize...) keep their span; the task's run has none
    assert "initialize" in started
    assert "tools/call slow_compute" not in started, started


def test_without_a_tracer_provider_the_run_skips_the_no_op_span() -> None:
    """In a fresh interpreter: OpenTelemetry's API keeps a provider once any was set (its
    proxies cache the real tracer), so "no provider" is only true of a process that never
    had one, as a user's server without tracing is."""
    import subprocess
    import sys

    code = f"import runpy; runpy.run_path({__file__!r})['check_without_a_tracer_provider']()"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=240,
        env=python_env(),  # tests/ on PYTHONPATH, for testkit
    )
    assert out.returncode == 0, out.stdout + out.stderr
