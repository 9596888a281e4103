"""The suite's own house rules: its helpers live in one package (``tests/testkit``), nothing
edits ``sys.path``, and the waiting helpers wait for a condition, not for a guessed time."""

from __future__ import annotations

import functools
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from testkit import example_server, warm
from testkit.doors import FRONT_DOORS, door_args, door_of, http_targets
from testkit.example_server import HttpServer
from testkit.procs import (
    PortTaken,
    free_port,
    listens_on,
    python_env,
    refusing_port,
    wait_listening,
)
from testkit.wait import WaitTimeout, until, until_async

TESTS = Path(__file__).resolve().parent
#: Python files under tests/ that are neither tests, conftests nor helpers: commands.
COMMANDS = {"generator/regen.py", "install_peers.py"}  # the README's commands
SYS_PATH_EDIT = re.compile(r"sys\.path\s*(\.\s*(insert|append|extend|remove|pop|clear)\b|\[|[+]?=)")


def suite_files() -> list[Path]:
    skip = ("fixtures", "node_modules", ".venv-fastmcp", "__pycache__")
    return sorted(p for p in TESTS.rglob("*.py") if not any(part in skip for part in p.parts))


def test_helpers_live_in_testkit() -> None:
    """A module that is no test, conftest or package marker is a helper: in testkit."""
    stray = [
        rel
        for p in suite_files()
        if (rel := p.relative_to(TESTS).as_posix()) not in COMMANDS
        and not rel.startswith("testkit/")
        and not p.name.startswith("test_")
        and p.name not in ("conftest.py", "__init__.py")
    ]
    assert not stray, f"helpers outside tests/testkit: {stray}"


def test_nothing_edits_sys_path() -> None:
    """tests/ is importable through pytest's ``pythonpath`` setting; a child process gets it
    on PYTHONPATH (``testkit.procs.python_env``); a generated package is imported from its
    directory by ``testkit.importing``."""
    edits = [
        f"{p.relative_to(TESTS)}:{n}"
        for p in suite_files()
        if p != Path(__file__).resolve()
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if SYS_PATH_EDIT.search(line)
    ]
    assert not edits, f"sys.path edited at {edits}"


def test_the_doors() -> None:
    assert FRONT_DOORS == ("endpoint", "sdk")
    assert door_args("endpoint") == () and door_args("sdk") == ("--no-task-endpoint",)
    targets = http_targets("stdio")
    assert targets == ["http-endpoint", "http-sdk", "stdio"]
    assert [door_of(t) for t in targets] == ["endpoint", "sdk", None]
    with pytest.raises(ValueError):
        door_args("lean")


def test_until_returns_the_first_satisfying_value() -> None:
    seen = iter([0, None, {"status": "working"}, {"status": "completed"}])
    got = until(lambda: next(seen), satisfied=lambda v: bool(v) and v["status"] != "working")
    assert got == {"status": "completed"}
    flaky = iter([OSError("not yet"), OSError("not yet"), "up"])

    def probe() -> str:
        value = next(flaky)
        if isinstance(value, Exception):
            raise value
        return value

    assert until(probe, ignoring=(OSError,), interval=0) == "up"


def test_until_names_what_it_waited_for() -> None:
    with pytest.raises(WaitTimeout, match=r"the task ends \(last value: 'working'\)"):
        until(lambda: "working", 0, satisfied=lambda v: v == "done", what="the task ends")
    with pytest.raises(WaitTimeout, match="last error: OSError"):
        until(_refuse, 0, ignoring=(OSError,))
    with pytest.raises(ZeroDivisionError):  # only the exceptions named are "not yet"
        until(lambda: 1 / 0, 0, ignoring=(OSError,))


def _refuse() -> None:
    raise OSError("refused")


@pytest.mark.anyio
async def test_until_async_awaits_async_probes_and_bounds_blocking_ones() -> None:
    calls: list[int] = []

    async def probe() -> int:
        calls.append(1)
        return len(calls)

    assert await until_async(probe, satisfied=lambda n: n >= 3, interval=0) == 3
    assert await until_async(lambda: "plain") == "plain"

    async def blocks() -> bool:
        await anyio.sleep_forever()
        return True

    with pytest.raises(WaitTimeout, match="never answers"):
        await until_async(blocks, 0.05, what="never answers")


@contextmanager
def _stranger() -> Iterator[int]:
    """A port another process (this one, standing in) listens on for the block."""
    with socket.socket() as stranger:
        stranger.bind(("127.0.0.1", 0))
        stranger.listen()
        yield int(stranger.getsockname()[1])


def test_a_port_a_stranger_listens_on_is_not_taken_for_the_server_s(tmp_path: Path) -> None:
    """A connection alone does not say whose socket answered: a free port another test
    process took before the server bound would have the test talk to that process while
    its own server exited. ``wait_listening`` asks ``/proc`` whose the listener is."""
    log = tmp_path / "child.log"
    log.write_text("")
    with _stranger() as port:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        with pytest.raises(PortTaken, match="address already in use"):
            wait_listening(child, port, log, timeout=10)
        assert child.poll() is not None, "the child that could not listen was stopped"
    # A server listening in a child of the process started (a shell, a launcher) is its own.
    port = free_port()
    shell = subprocess.Popen(
        ["sh", "-c", f"{sys.executable} -m http.server --bind 127.0.0.1 {port} 2>/dev/null; :"],
        start_new_session=True,  # its own process group: stopped with its child below
    )
    try:
        wait_listening(shell, port, log, timeout=30)
        assert listens_on(shell.pid, port) is True
        with refusing_port() as nobody:
            assert listens_on(1, nobody) is None  # nothing listens there
    finally:
        os.killpg(shell.pid, signal.SIGKILL)
        shell.wait(timeout=15)


def test_the_example_server_moves_off_a_port_taken_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _stranger() as taken:
        ports = iter([taken])
        real = example_server.free_port
        monkeypatch.setattr(example_server, "free_port", lambda: next(ports, None) or real())
        server = HttpServer(log_dir=tmp_path, front_door=FRONT_DOORS[0]).start()
        try:
            assert server.port != taken
            answer = httpx.post(
                server.url,
                json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                headers={"Accept": "application/json, text/event-stream"},
            )
            assert answer.status_code in (200, 400), answer.text  # our server, not the stranger
        finally:
            server.stop()


def test_a_warm_start_runs_the_module_as_a_new_interpreter_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``testkit.warm`` forks a server or ``mcptask`` from a process that has imported them:
    what it runs must be what ``python -m MODULE ARGS`` runs, exit codes, output, the
    descriptor limit and signals included."""
    env = python_env()

    def both(start: Callable[[], Any]) -> tuple[Any, Any]:
        """``start()`` warm, then in a new interpreter (``MCPTASK_TEST_WARM=0``)."""
        got = start()
        with monkeypatch.context() as cold:
            cold.setenv(warm.ENV_WARM, "0")
            return got, start()

    for args in (["--help"], ["--page-size", "0"]):
        (hot, hot_log), (cold, cold_log) = both(functools.partial(_started, tmp_path, args, env))
        assert isinstance(hot, warm.WarmProcess) and not isinstance(cold, warm.WarmProcess)
        assert (hot.wait(60), hot_log.read_text()) == (cold.wait(60), cold_log.read_text())
    for args, stdin in ((["--help"], None), (["tasks", "get"], None), (["nope"], "x")):
        cli = functools.partial(warm.run_python, "mcp_tasks.cli", args, env=env, timeout=60)
        got, want = both(functools.partial(cli, input=stdin))
        assert (got.returncode, got.stdout, got.stderr) == (
            want.returncode, want.stdout, want.stderr,
        ), args  # fmt: skip
    hung = ["tools", "sleep 5"]  # a stdio server that never answers: killed at the timeout
    with pytest.raises(subprocess.TimeoutExpired):
        warm.run_python("mcp_tasks.cli", hung, env=env, timeout=1)
    server = HttpServer(log_dir=tmp_path, front_door=FRONT_DOORS[0], fd_limit=200).start()
    try:
        assert isinstance(server.proc, warm.WarmProcess)
        limits = Path(f"/proc/{server.pid}/limits").read_text()
        assert re.search(r"Max open files\s+200\s", limits), limits
        os.kill(server.pid, signal.SIGTERM)
        assert server.proc.wait(30) == -signal.SIGTERM  # as a new interpreter's uvicorn ends
    finally:
        server.stop()


def _started(tmp_path: Path, args: list[str], env: dict[str, str]) -> tuple[warm.Proc, Path]:
    log = tmp_path / f"run-{len(list(tmp_path.iterdir()))}.log"
    with open(log, "wb") as out:
        return warm.start_python(example_server.SERVER_MODULE, args, out, env), log
