"""The README tells the truth: its handler example runs, its limits are the defaults."""

from __future__ import annotations

import re
from pathlib import Path

import anyio

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_subclassing_example_runs() -> None:
    block = (
        README.split("### Subclassing a generated handler", 1)[1]
        .split("```python", 1)[1]
        .split("```", 1)[0]
    )
    namespace: dict[str, object] = {}
    exec(compile(block, "README.md", "exec"), namespace)
    from mcp_tasks.errors import TaskNotFound
    from mcp_tasks.handlers import RequestContext

    handler = namespace["MyTasks"]()  # type: ignore[operator]
    ctx = RequestContext(requestor="alice")

    async def run() -> None:
        got = await handler.dispatch("tasks/get", {"taskId": "job-1"}, ctx)
        assert got["status"] == "working" and got["ttl"] is None
        try:
            await handler.dispatch("tasks/get", {"taskId": "nope"}, ctx)
        except TaskNotFound as exc:
            assert exc.to_error() == {
                "code": -32602,
                "message": "Failed to retrieve task: Task not found",
            }
        else:
            raise AssertionError("unknown task must raise TaskNotFound")
        try:
            await handler.dispatch("tasks/cancel", {"taskId": "job-1"}, ctx)
        except Exception as exc:  # not overridden: -32601
            assert getattr(exc, "code", None) == -32601
        else:
            raise AssertionError("unimplemented handler must answer -32601")

    anyio.run(run)


def test_limits_table_matches_engine_defaults() -> None:
    from mcp_tasks.runtime import EngineConfig

    cfg = EngineConfig()
    section = README.split("## Runtime limits", 1)[1].split("\n## ", 1)[0]
    rows = {m.group(2): m.group(1) for m in re.finditer(r"\| ([^|]*) \| `([a-z_]+)`", section)}
    numbers = {
        k: [int(n.replace(",", "")) for n in re.findall(r"\d[\d,]*", v)] for k, v in rows.items()
    }
    assert cfg.default_ttl_ms in numbers["default_ttl_ms"]
    assert cfg.max_ttl_ms in numbers["max_ttl_ms"]
    assert cfg.max_active_per_requestor in numbers["max_active_per_requestor"]
    assert cfg.page_size in numbers["page_size"]
    assert cfg.poll_interval_ms in numbers["poll_interval_ms"]
    assert cfg.sweep_interval_s in numbers["sweep_interval_s"]
    rate = re.search(r"\| ([\d,]+) per (\d+) s", section)
    assert rate is not None
    assert (int(rate.group(1).replace(",", "")), float(rate.group(2))) == (
        cfg.rate_limit_calls,
        cfg.rate_limit_window_s,
    )
    assert cfg.allow_unlimited_ttl is False
