"""A new revision, the day it ships: the installed runtime serves a package of a revision it
does not know in a shape it knows, under that shape's rules, saying so in one line at start;
and a package it cannot serve is named by the generator when it writes it, not first by
``McpTasks(...)`` at deploy.

The packages are generated from the simulated next revision (``testkit.next_revision``:
2027-03-31, the tasks extension's shape, and the 2025-11-25 schema under that revision's
name, the core shape). Served over HTTP by real clients through both front doors, with the
typed stubs of the package: ``tests/mcp/test_typed_clients.py``.
"""

from __future__ import annotations

import importlib
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from mcp_tasks import descriptor as own
from mcp_tasks._handlers import RequestContext
from mcp_tasks.runtime import TaskEngine
from mcp_tasks.runtime.faces.adopt import Adopted
from mcp_tasks.runtime.faces.core import CoreTasksMixin
from mcp_tasks.runtime.faces.extension import ExtensionTasksMixin
from mcp_tasks.runtime.serve.server import face_handlers
from mcp_tasks.serves import verdict
from testkit.gen import PINNED, SCHEMA, SCHEMA_EXT, run_cli
from testkit.importing import import_package, unload
from testkit.next_revision import NEXT, write_core_next, write_folded
from testkit.procs import python_env

pytestmark = pytest.mark.anyio
WARNING = "mcptask-gen: warning: "
EXT_ID = "io.modelcontextprotocol/tasks"


def _package(tmp: Path, name: str, *schemas: Path) -> ModuleType:
    out = tmp / name
    result = run_cli(*schemas, "-o", out)
    assert result.exit_code == 0, result.output
    assert not [ln for ln in result.stderr.splitlines() if "cannot serve" in ln]
    pkg = import_package(tmp, name)
    for face in ("core", "extension"):
        if (out / face).is_dir():
            importlib.import_module(f"{name}.{face}.handlers")
    return pkg


@pytest.fixture(scope="module")
def acme_next(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    """2025-11-25 beside the 2027-03-31 extension-shaped face."""
    tmp = tmp_path_factory.mktemp("next")
    yield _package(tmp, "acme_next", SCHEMA, write_folded(tmp))
    unload("acme_next")


@pytest.fixture(scope="module")
def acme_core_next(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    """A 2027-03-31 face of the core shape."""
    tmp = tmp_path_factory.mktemp("core-next")
    yield _package(tmp, "acme_core_next", write_core_next(tmp))
    unload("acme_core_next")


def _ctx() -> RequestContext:
    return RequestContext(requestor="alice", request_id=1)


async def _work(_: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": "done"}]}


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


async def test_an_extension_shaped_new_revision_is_served_under_the_extension_s_rules(
    acme_next: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """X-CREATE-1, X-GET-1: the 2027-03-31 handler answers on this runtime's 2026-07-28
    face, with its own package's models; one line at start names the revision and the
    rules applied; its 2025-11-25 face is served as it is (no line)."""

    class NextTasks(ExtensionTasksMixin, acme_next.extension.handlers.TasksHandlerBase):  # type: ignore[misc]
        pass

    class Core(CoreTasksMixin, acme_next.core.handlers.TasksHandlerBase):  # type: ignore[misc]
        pass

    assert NextTasks.face == NEXT
    async with TaskEngine() as engine:
        with caplog.at_level(logging.WARNING):
            handlers = face_handlers(engine, [NextTasks(engine), Core(engine)])
        (line,) = _lines(caplog)
        assert line.startswith("handlers: NextTasks (acme_next): revision 2027-03-31, ")
        assert "is served with the rules of its revision 2026-07-28" in line
        assert "the tasks extension io.modelcontextprotocol/tasks" in line
        ext = handlers["2026-07-28"]
        assert isinstance(ext, Adopted) and isinstance(ext.handler, NextTasks)
        assert ext.face == "2026-07-28" and set(handlers) == {"2025-11-25", "2026-07-28"}
        made = await ext.dispatch_augmented("tools/call", {"name": "t"}, _ctx(), work=_work)
        got = await ext.handler.tasks_get(
            acme_next.extension.models.GetTaskRequestParams(taskId=made["taskId"]), _ctx()
        )
        assert type(got).__module__ == "acme_next.extension.models"
        declared: dict[str, Any] = {
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {EXT_ID: {}}}
        }
        asking = RequestContext(requestor="alice", request_id=2, meta=declared)  # X-CAP-1
        wire = await ext.dispatch("tasks/get", {"taskId": made["taskId"]}, asking)
        assert wire["taskId"] == made["taskId"] and wire["resultType"] == "complete"


async def test_a_core_shaped_new_revision_is_served_under_the_2025_11_25_rules(
    acme_core_next: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """R-CREATE-2, R-GET-1 on the new revision's handler: one line at start."""

    class CoreNext(CoreTasksMixin, acme_core_next.core.handlers.TasksHandlerBase):  # type: ignore[misc]
        pass

    async with TaskEngine() as engine:
        with caplog.at_level(logging.WARNING):
            handlers = face_handlers(engine, [CoreNext(engine)])
        (line,) = _lines(caplog)
        assert "revision 2027-03-31" in line and "rules of its revision 2025-11-25" in line
        assert "the core protocol's tasks" in line
        core = handlers["2025-11-25"]
        created = await core.dispatch_augmented(
            "tools/call", {"name": "t", "task": {}}, _ctx(), work=_work
        )
        task_id = created["task"]["taskId"]
        done = await core.dispatch("tasks/result", {"taskId": task_id}, _ctx())
        assert done["content"][0]["text"] == "done"


def test_the_rule_says_what_it_cannot_serve() -> None:
    """One home for the rule: a shape this runtime has no face of, a revision it knows in
    another shape, another bindings API, a version the package does not accept."""
    extension = "io.modelcontextprotocol/tasks"
    ok = verdict([("2025-11-25", "core", None), (NEXT, "extension", extension)], 1, None)
    assert ok.problem() is None and [f.rules for f in ok.faces] == ["2025-11-25", "2026-07-28"]
    other = verdict([(NEXT, "extension", "example.com/other")], 1, None)
    assert "has no face of" in str(other.problem()) and "example.com/other" in str(other.problem())
    swapped = verdict([("2026-07-28", "core", None)], 1, None)
    assert "this runtime's 2026-07-28 is the tasks extension" in str(swapped.problem())
    assert "bindings API 2" in str(verdict([], 2, None).problem())
    needs = verdict([], 1, "mcptask-runtime>=9.0.0,<10")
    assert f"this runtime is mcptask-runtime {own.GENERATOR_VERSION}" in str(needs.problem())


def test_the_generator_names_a_package_the_installed_runtime_cannot_serve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The installed runtime of another release line: one line when the package is written,
    naming the runtime and why; none for a package with its runtime vendored in."""
    monkeypatch.setattr(own, "GENERATOR_VERSION", "0.9.0")
    out = tmp_path / "acme_tasks"
    result = run_cli(*PINNED, "-o", out)
    assert result.exit_code == 0, result.output
    (line,) = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert line.startswith(
        f"{WARNING}the installed runtime (mcptask-runtime 0.9.0) cannot serve {out}: acme_tasks"
        " needs mcptask-runtime>=0.1.0,<0.2; this runtime is mcptask-runtime 0.9.0"
    ), line
    vendored = run_cli(*PINNED, "-o", tmp_path / "own_tasks", "--with-runtime")
    assert vendored.exit_code == 0 and "cannot serve" not in vendored.stderr


def test_a_runtime_without_the_extension_s_face_is_named_when_the_generator_writes(
    tmp_path: Path,
) -> None:
    """A real runtime of the 2025-11-25 face only (generated so, vendored as ``mcp_tasks`` on
    the path of a generator run in its own process): the extension's package is named as
    one it cannot serve, the 2025-11-25 package is not."""
    runtime = tmp_path / "runtime"
    made = run_cli(SCHEMA, "-o", runtime / "mcp_tasks", "--with-runtime")
    assert made.exit_code == 0, made.output
    env = python_env()
    env["PYTHONPATH"] = f"{runtime}:{env['PYTHONPATH']}"

    def generate(schema: Path, name: str) -> list[str]:
        run = subprocess.run(
            [sys.executable, "-m", "mcptask_gen", str(schema), "-o", str(tmp_path / name)],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
        )
        assert run.returncode == 0, run.stderr
        return [ln for ln in run.stderr.splitlines() if ln.strip()]

    (line,) = generate(SCHEMA_EXT, "ext_tasks")
    assert line.startswith(f"{WARNING}the installed runtime (mcptask-runtime ")
    assert "its revision 2026-07-28 is the tasks extension io.modelcontextprotocol/tasks" in line
    assert "serves revisions 2025-11-25" in line and "has no face of" in line
    assert generate(SCHEMA, "core_tasks") == []
