"""The ``mcptask`` command (issue 4 point 5), run as a real process against the example server."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

SERVER = f"{sys.executable} -m mcp_tasks.examples.server --stdio"


def mcptask(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcp_tasks.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_call_as_task_over_stdio_shows_status() -> None:
    out = mcptask("call", SERVER, "slow_compute", "seconds=0.3", "label=cli", "--task")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "done after 0.3s (cli)"
    assert "completed" in out.stderr  # the status line followed the task (R-GET-1)


def test_call_errors_over_http(http_server: Any) -> None:
    ok = mcptask("call", http_server.url, "greet", "name=Ada")
    assert ok.returncode == 0 and ok.stdout.strip() == "Hello, Ada!"
    # R-TOOL-4: a required tool without --task -> -32601, reported on stderr
    required = mcptask("call", http_server.url, "failing_job")
    assert required.returncode == 1 and "-32601" in required.stderr
    failed = mcptask("call", http_server.url, "failing_job", "--task")
    assert failed.returncode == 1 and failed.stdout.strip() == "job failed"
    # the helper refuses a task call the tool forbids (R-TOOL-2)
    refused = mcptask("call", http_server.url, "greet", "name=x", "--task")
    assert refused.returncode == 2


def test_tasks_subcommands_need_a_lasting_identity(http_server: Any) -> None:
    # each invocation is a new session: the task list of a fresh session is empty (R-SEC-1)
    listed = mcptask("tasks", "list", http_server.url)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == {"tasks": []}
    missing = mcptask("tasks", "get", http_server.url, "nope")
    assert missing.returncode == 1 and "-32602" in missing.stderr
