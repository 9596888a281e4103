"""The ten ``tasks-*`` scenarios of the official conformance suite (the 2026-07-28 tasks
extension, ``io.modelcontextprotocol/tasks``), one ``--scenario`` per run.

``@modelcontextprotocol/conformance`` (pinned in package.json) takes ONE scenario name per
``--scenario``; ``--suite all`` would run many unrelated 2026 scenarios too. No
``--spec-version``: with ``--spec-version 2025-11-25`` the extension scenarios are "not
applicable" and skipped with exit 0; without it they run at 2026-07-28 over the suite's
stateless connection (``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name`` headers and the
``_meta`` envelope on every request). Each run writes
``OUT/server-<scenario>-<timestamp>/checks.json``; the suite exits non-zero on any FAILURE,
so the exit code is not read: the checks are. The suite also adds a ``wire-schema-valid``
check per scenario (every message the server sent, against the core 2026-07-28 schema).
"""

from __future__ import annotations

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from testkit.interop import INTEROP_DIR, node_process

CLI = INTEROP_DIR / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"

#: Every ``tasks-*`` scenario of 0.2.0-alpha.12 (``tasks-status-notifications`` is one
#: check the suite itself always reports SKIPPED: "pending subscriptions/listen rewrite").
TASK_SCENARIOS = (
    "tasks-lifecycle",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-request-state-removal",
    "tasks-mrtr-input",
    "tasks-request-headers",
    "tasks-dispatch-and-envelope",
    "tasks-status-notifications",
    "tasks-required-task-error",
    "tasks-mrtr-composition",
)
#: The scenario whose only check the suite skips on purpose.
SKIPPED_BY_SUITE = "tasks-status-notifications"


def run_scenario(
    url: str, scenario: str, out_dir: Path, timeout: float = 240
) -> list[dict[str, Any]]:
    """Run one scenario against ``url``; every check it recorded, each with ``scenario``
    added. A run that wrote no ``checks.json`` yields one FAILURE check ``harness``
    carrying the suite's output."""
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        out = node_process(
            str(CLI),
            "server",
            "--url",
            url,
            "--scenario",
            scenario,
            "--output-dir",
            str(out_dir),
            timeout=timeout,
            cwd=out_dir,
        )
        report = out.stdout[-3000:] + out.stderr[-2000:]
    except subprocess.TimeoutExpired as exc:
        report = f"timed out after {timeout}s: {exc}"
    found = sorted(out_dir.glob(f"server-{scenario}-*/checks.json"))
    if not found:
        return [{"scenario": scenario, "id": "harness", "status": "FAILURE", "details": report}]
    return [{"scenario": scenario, **check} for check in json.loads(found[-1].read_text())]


def run_task_scenarios(url: str, out_dir: Path, workers: int = 3) -> list[dict[str, Any]]:
    """All of :data:`TASK_SCENARIOS` against ``url`` (a few at a time: most of a run is
    waiting on the server), in scenario order."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        runs = pool.map(lambda s: run_scenario(url, s, out_dir / s), TASK_SCENARIOS)
        return [check for checks in runs for check in checks]


def failing(checks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The checks that did not pass (the suite's own skip of :data:`SKIPPED_BY_SUITE`
    excepted), each reduced to what explains it."""
    return [
        {k: c.get(k) for k in ("scenario", "id", "status", "errorMessage", "details")}
        for c in checks
        if c["status"] != "SUCCESS"
        and not (c["scenario"] == SKIPPED_BY_SUITE and c["status"] == "SKIPPED")
    ]
