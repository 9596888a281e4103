"""The suite's own house rules: its helpers live in one package (``tests/testkit``), nothing
edits ``sys.path``, and the waiting helpers wait for a condition, not for a guessed time."""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import pytest

from testkit.doors import FRONT_DOORS, door_args, door_of, http_targets
from testkit.wait import WaitTimeout, until, until_async

TESTS = Path(__file__).resolve().parent
#: Python files under tests/ that are neither tests, conftests nor helpers: commands.
COMMANDS = {"generator/regen.py", "install_peers.py"}  # the README's commands
SYS_PATH_EDIT = re.compile(r"sys\.path\s*(\.\s*(insert|append|extend|remove|pop|clear)\b|\[|[+]?=)")


def suite_files() -> list[Path]:
    skip = ("fixtures", "node_modules", ".venv-fastmcp", "__pycache__")
    return sorted(
        p for p in TESTS.rglob("*.py") if not any(part in skip for part in p.parts)
    )


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
