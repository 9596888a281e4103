"""``mcptask ... | head``: when stdout's reader has gone, mcptask stops quietly with status
141 (128 + SIGPIPE, what a shell reports for a command a closed pipe stopped, so
``set -o pipefail`` still sees the output was cut short), no traceback.

The reader is a real pipe closed before mcptask writes: its read end is closed before the
child starts, so every write to stdout fails, whenever it comes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.procs import python_env

SERVER = f"{sys.executable} -m mcp_tasks.examples.server --stdio"
MCPTASK = shutil.which("mcptask", path=str(Path(sys.executable).parent))


def mcptask_into_closed_pipe(*args: str) -> subprocess.CompletedProcess[str]:
    assert MCPTASK is not None, "mcptask is not installed beside this Python"
    read, write = os.pipe()
    os.close(read)  # the reader is gone before mcptask writes a byte
    try:
        return subprocess.run(
            [MCPTASK, *args],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            env=python_env(),
        )
    finally:
        os.close(write)


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(("tools", SERVER), id="tools"),
        pytest.param(("tasks", "list", SERVER), id="tasks list"),
        pytest.param(("call", SERVER, "slow_compute", "seconds=0"), id="call"),
    ],
)
def test_a_closed_stdout_ends_quietly(args: tuple[str, ...]) -> None:
    done = mcptask_into_closed_pipe(*args)
    assert done.returncode == 141, done.stderr
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr
    assert "Exception ignored" not in done.stderr, done.stderr


def test_a_reader_that_stops_after_the_first_line() -> None:
    """Like ``| head -1``: the first line arrives, then the reader closes; whether the rest
    was already written decides 0 or 141, never a traceback."""
    assert MCPTASK is not None
    proc = subprocess.Popen(
        [MCPTASK, "tools", SERVER], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=python_env(),
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) in (0, 141), err
    assert first.strip()
    assert "Traceback" not in err and "Exception ignored" not in err, err
