"""The official MCP conformance suite against our example server.

``@modelcontextprotocol/conformance`` (pinned in package.json; it needs Node 22+) runs its
active server scenarios for ``--spec-version 2025-11-25`` against the example server over
Streamable HTTP. ``conformance-baseline.yml`` lists only the scenarios that need tools,
prompts, resources or capabilities the example server does not have; the suite exits
non-zero on any other failure and on a baseline entry that starts passing. Every message
our server sends is validated against the spec's JSON schema (``wire-schema-valid``).

The same suite's ten ``tasks-*`` scenarios check the 2026-07-28 tasks extension
(``testkit.ext_conformance``): no baseline there, every check must pass. Both runs go against ONE
server process (the module's ``example_server``): one process serves both faces.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testkit.ext_conformance import SKIPPED_BY_SUITE, TASK_SCENARIOS, failing, run_task_scenarios
from testkit.interop import INTEROP_DIR, HttpServer, node_env, node_path
from testkit.procs import running

pytestmark = pytest.mark.usefixtures("node_modules")

CLI = INTEROP_DIR / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
BASELINE = INTEROP_DIR / "conformance-baseline.yml"


@pytest.fixture(scope="module")
def example_server(
    node_modules: None, tmp_path_factory: pytest.TempPathFactory, front_door: str
) -> Iterator[HttpServer]:
    """One example server process for the 2025-11-25 run and the ``tasks-*`` runs, per
    front door: the suite checks both."""
    log_dir = tmp_path_factory.mktemp("conformance-server")
    with running(HttpServer(log_dir=log_dir, front_door=front_door)) as server:
        yield server


def test_conformance_server_scenarios(example_server: HttpServer, tmp_path: Path) -> None:
    server = example_server
    # the server outlives this test: the extension's runs use the same process
    out = subprocess.run(
        [
            str(node_path()),
            str(CLI),
            "server",
            "--url",
            server.url,
            "--spec-version",
            "2025-11-25",
            "--expected-failures",
            str(BASELINE),
            "--output-dir",
            str(tmp_path / "results"),
        ],
        cwd=tmp_path,
        env=node_env(),
        capture_output=True,
        text=True,
        timeout=240,
        stdin=subprocess.DEVNULL,
    )
    report = out.stdout[-6000:] + out.stderr[-3000:]
    assert out.returncode == 0, report
    checks = [
        check
        for path in sorted((tmp_path / "results").glob("*/checks.json"))
        for check in json.loads(path.read_text())
    ]
    # the suite really ran: the handshake, tools/list and the wire-schema checks passed
    passed = {c["id"] for c in checks if c["status"] == "SUCCESS"}
    assert {"server-initialize", "tools-list", "ping"} <= passed, report
    wire = [c for c in checks if c["id"] == "wire-schema-valid"]
    assert wire and all(c["status"] == "SUCCESS" for c in wire), [
        c.get("details") for c in wire if c["status"] != "SUCCESS"
    ]


@pytest.fixture(scope="module")
def extension_checks(
    example_server: HttpServer, tmp_path_factory: pytest.TempPathFactory
) -> list[dict[str, Any]]:
    """Every check of the ten ``tasks-*`` scenarios against the example server (run once)."""
    tmp = tmp_path_factory.mktemp("conformance-ext")
    return run_task_scenarios(example_server.url, tmp / "results")


def test_extension_conformance_harness(extension_checks: list[dict[str, Any]]) -> None:
    """The runner really ran: every scenario recorded checks, the suite reached the server
    over its stateless 2026-07-28 connection, and skipped only what it always skips."""
    assert {c["scenario"] for c in extension_checks} == set(TASK_SCENARIOS)
    assert "harness" not in {c["id"] for c in extension_checks}, failing(extension_checks)
    by_id = {(c["scenario"], c["id"]): c["status"] for c in extension_checks}
    assert by_id[("tasks-lifecycle", "tasks-sync-tool-call")] == "SUCCESS"
    skipped = {c["scenario"] for c in extension_checks if c["status"] == "SKIPPED"}
    assert skipped <= {SKIPPED_BY_SUITE}


def test_extension_conformance(extension_checks: list[dict[str, Any]]) -> None:
    """X-CAP-2, X-CAP-5, X-CAP-8, X-GET-4, X-UPD-7, X-HTTP-4, X-COMPAT-4 and the rest of the
    extension as the official suite checks them: every check of every ``tasks-*`` scenario
    passes, with no baseline (the suite skips ``tasks-status-notifications`` itself)."""
    assert failing(extension_checks) == []
