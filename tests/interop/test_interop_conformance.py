"""The official MCP conformance suite against our example server.

``@modelcontextprotocol/conformance`` (pinned in package.json; it needs Node 22+) runs its
active server scenarios for ``--spec-version 2025-11-25`` against the example server over
Streamable HTTP. ``conformance-baseline.yml`` lists only the scenarios that need tools,
prompts, resources or capabilities the example server does not have; the suite exits
non-zero on any other failure and on a baseline entry that starts passing. Every message
our server sends is validated against the spec's JSON schema (``wire-schema-valid``).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from interop import HERE, HttpServer, node_env, node_path

pytestmark = pytest.mark.usefixtures("node_modules")

CLI = HERE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
BASELINE = HERE / "conformance-baseline.yml"


def test_conformance_server_scenarios(tmp_path: Path) -> None:
    server = HttpServer(log_dir=tmp_path)
    try:
        server.start()
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
            timeout=300,
            stdin=subprocess.DEVNULL,
        )
    finally:
        server.stop()
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
