"""Smoke test: the MCP Inspector's CLI mode calls our example server's task tools.
``@modelcontextprotocol/inspector`` (pinned in package.json; Node 22+) negotiates
2025-11-25 for an ad-hoc URL and calls a ``taskSupport: "required"`` tool as a task
(task-augmented ``tools/call``, ``tasks/get`` polling, ``tasks/result``).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from testkit.interop import INTEROP_DIR, HttpServer, node_env, node_path

pytestmark = pytest.mark.usefixtures("node_modules")

LAUNCHER = (
    INTEROP_DIR / "node_modules" / "@modelcontextprotocol" / "inspector" / "clients" / "launcher"
)


def inspector(url: str, home: Path, *args: str) -> tuple[int, Any]:
    env = node_env()
    env["HOME"] = str(home)  # the Inspector keeps a catalog and secrets under ~/.mcp-inspector
    out = subprocess.run(
        [
            str(node_path()),
            str(LAUNCHER / "build" / "index.js"),
            "--cli",
            url,
            "--format",
            "json",
            "-q",
            *args,
        ],
        cwd=home,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    payload = (out.stdout if out.returncode == 0 else out.stderr).strip().splitlines()
    assert payload, (out.returncode, out.stdout, out.stderr)
    return out.returncode, json.loads(payload[-1])


def test_inspector_cli_calls_task_tools(tmp_path: Path, front_door: str) -> None:
    server = HttpServer(log_dir=tmp_path, front_door=front_door)
    try:
        server.start()
        rc, listed = inspector(server.url, tmp_path, "--method", "tools/list")
        assert rc == 0
        support = {
            t["name"]: t.get("execution", {}).get("taskSupport") for t in listed["result"]["tools"]
        }
        assert support["failing_job"] == "required" and support["slow_compute"] == "optional"

        # required -> the Inspector calls it as a task; a plain call would be -32601 (R-TOOL-4)
        rc, failed = inspector(
            server.url, tmp_path, "--method", "tools/call", "--tool-name", "failing_job"
        )
        assert rc != 0 and "job failed" in failed["error"]["message"]  # R-STATE-4, R-RESULT-1
        assert "task-augmented" not in failed["error"]["message"]

        rc, crashed = inspector(
            server.url, tmp_path, "--method", "tools/call", "--tool-name", "protocol_error_job"
        )
        assert rc != 0 and "protocol_error_job crashed" in crashed["error"]["message"]

        # optional -> a plain call (R-TOOL-3)
        rc, done = inspector(
            server.url, tmp_path, "--method", "tools/call", "--tool-name", "slow_compute",
            "--tool-arg", "seconds=0", "label=inspector",
        )  # fmt: skip
        assert rc == 0
        assert done["result"]["content"][0]["text"] == "done after 0s (inspector)"
    finally:
        server.stop()
