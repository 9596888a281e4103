"""Typed at both ends: a user regenerates their bindings from a revised schema (an optional
``resultSummary`` on a completed task), serves it with the installed runtime, and reads the
field on the client through the generated stubs (``<face>.client.TasksClient``) over the
runtime's client (``connect()``), under ``mypy --strict``, on both faces and through both
front doors.

The same under a new revision: the extension's shape named 2027-03-31 (``acme_next``, the
change above folded into the core schema, ``testkit.next_revision``), served under the rules
of the runtime's 2026-07-28 face with one warning line at start, and read by its own stubs
on that face. The server's handlers are the runtime's defaults (``CoreTasksMixin``,
``ExtensionTasksMixin``) on the user's bases, setting the field on a completed task.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.doors import FRONT_DOORS
from testkit.gen import SCHEMA, SCHEMA_EXT, run_cli
from testkit.next_revision import NEXT, folded, revised, with_result_summary
from testkit.procs import free_port, python_env, stop_process, wait_listening
from testkit.typecheck import TYPECHECK, assert_mypy_strict, mypy_strict

PACKAGES = ("acme_tasks", "acme_next")
CORE_SUMMARY = "summed up on the core face"
EXT_SUMMARY = "summed up on the extension face"

SERVER = '''"""PKG's handlers, served by the installed runtime: the defaults, plus resultSummary."""
import sys

import anyio
from mcp.server.mcpserver import MCPServer

from mcp_tasks.protocol import TASK_SUPPORT_OPTIONAL
from mcp_tasks.runtime import TaskEngine
from mcp_tasks.runtime.faces.core import CoreTasksMixin
from mcp_tasks.runtime.faces.extension import ExtensionTasksMixin
from mcp_tasks.runtime.serve.server import McpTasks, TaskTools
from PKG import protocol
from PKG.core import models as core_models
from PKG.core.handlers import RequestContext
from PKG.core.handlers import TasksHandlerBase as CoreBase
from PKG.extension import models as ext_models
from PKG.extension.handlers import TasksHandlerBase as ExtensionBase


class Core(CoreTasksMixin, CoreBase):
    async def tasks_get(
        self, params: core_models.GetTaskRequestParams, ctx: RequestContext
    ) -> core_models.GetTaskResult:
        task: core_models.GetTaskResult = await super().tasks_get(params, ctx)
        if task.status == protocol.COMPLETED:
            task.resultSummary = "CORE_SUMMARY"
        return task


class Extension(ExtensionTasksMixin, ExtensionBase):
    async def tasks_get(
        self, params: ext_models.GetTaskRequestParams, ctx: RequestContext
    ) -> ext_models.GetTaskResult:
        task: ext_models.GetTaskResult = await super().tasks_get(params, ctx)
        if isinstance(task, ext_models.GetTaskResultCompleted):
            task.resultSummary = "EXT_SUMMARY"
        return task


mcp = MCPServer("acme")
tools = TaskTools()


@tools.tool(task_support=TASK_SUPPORT_OPTIONAL)
@mcp.tool()
async def count_to(n: int = 1) -> str:
    await anyio.sleep(0.1 * n)
    return f"counted to {n}"


async def main(port: int, endpoint: bool) -> None:
    import uvicorn

    engine = TaskEngine()
    tasks = McpTasks(mcp, engine=engine, handlers=[Core(engine), Extension(engine)], tools=tools)
    async with tasks:
        app = tasks.streamable_http_app(task_endpoint=endpoint)
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
        await uvicorn.Server(config).serve()


anyio.run(main, int(sys.argv[1]), sys.argv[2] == "endpoint")
'''.replace("CORE_SUMMARY", CORE_SUMMARY).replace("EXT_SUMMARY", EXT_SUMMARY)

CLIENT = '''"""A client of PKG on both faces: the field its revised schema added, read and typed."""
import sys

import anyio

from mcp_tasks.runtime.client.requestor import connect
from PKG.core import models as core_models
from PKG.core.client import TasksClient as CoreClient
from PKG.extension import models as ext_models
from PKG.extension.client import TasksClient as ExtensionClient


async def on_core(url: str) -> str | None:
    async with connect(url) as session:  # the 2025-11-25 handshake
        tasks = session.typed(CoreClient)
        call = {"name": "count_to", "arguments": {"n": 2}}
        created = await tasks.tools_call_task(call, core_models.TaskMetadata(ttl=60_000))
        asked = core_models.GetTaskRequestParams(taskId=created.task.taskId)
        task = await tasks.tasks_get(asked)
        while task.status != core_models.TaskStatus.completed:
            await anyio.sleep((task.pollInterval or 100) / 1000)
            task = await tasks.tasks_get(asked)
        summary: str | None = task.resultSummary
        return summary


async def on_extension(url: str) -> str | None:
    async with connect(url, face="2026-07-28") as session:  # the tasks extension
        tasks = session.typed(ExtensionClient)
        created = await tasks.tools_call_task({"name": "count_to", "arguments": {"n": 2}})
        assert isinstance(created, ext_models.CreateTaskResult), created
        asked = ext_models.GetTaskRequestParams(taskId=created.taskId)
        while True:
            task = await tasks.tasks_get(asked)
            if isinstance(task, ext_models.GetTaskResultCompleted):
                summary: str | None = task.resultSummary
                return summary
            await anyio.sleep((task.pollIntervalMs or 100) / 1000)


async def main(url: str) -> None:
    print(f"core: {await on_core(url)}")
    print(f"extension: {await on_extension(url)}")


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
'''

#: the same read through the runtime's own requestor, whose models are the runtime's
RUNTIME_ONLY = """from mcp_tasks.extension import models
from mcp_tasks.runtime.client.requestor import connect


async def summary(url: str, task_id: str) -> str | None:
    async with connect(url, face="2026-07-28") as session:
        requestor = session.tasks.ext
        assert requestor is not None
        task = await requestor.get(task_id)
        if isinstance(task, models.GetTaskResultCompleted):
            return task.resultSummary
        return None
"""


@pytest.fixture(scope="module")
def packages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Package name -> the directory holding it (bindings only), its server and its client."""
    out: dict[str, Path] = {}
    for name in PACKAGES:
        tmp = tmp_path_factory.mktemp(name)
        core = revised(tmp, SCHEMA)
        if name == "acme_next":
            ext = tmp / "next" / "schema.json"
            ext.parent.mkdir()
            ext.write_text(__import__("json").dumps(with_result_summary(folded())))
        else:
            ext = revised(tmp, SCHEMA_EXT)
        made = run_cli(core, ext, "-o", tmp / name)
        assert made.exit_code == 0, made.output
        assert not (tmp / name / "runtime").exists()
        (tmp / "server.py").write_text(SERVER.replace("PKG", name))
        (tmp / "client.py").write_text(CLIENT.replace("PKG", name))
        out[name] = tmp
    return out


@TYPECHECK
@pytest.mark.parametrize("name", PACKAGES)
def test_the_client_passes_mypy_strict_with_the_users_models(
    packages: dict[str, Path], name: str
) -> None:
    """The stubs hand back the user's models: its new field type-checks; against the
    runtime's own models the same client would not (the reason the stubs exist)."""
    tmp = packages[name]
    assert_mypy_strict("client.py", cwd=tmp)
    (tmp / "runtime_only.py").write_text(RUNTIME_ONLY)
    refused = mypy_strict("runtime_only.py", cwd=tmp)
    assert refused.returncode == 1
    assert '"GetTaskResultCompleted" has no attribute "resultSummary"' in refused.stdout


@pytest.fixture(scope="module", params=[(n, d) for n in PACKAGES for d in FRONT_DOORS], ids=str)
def served(
    request: pytest.FixtureRequest, packages: dict[str, Path]
) -> Iterator[tuple[str, str, Path]]:
    """(package, URL, the server's log): the package's server on a free port, one door."""
    name, door = request.param
    tmp = packages[name]
    port = free_port()
    log = tmp / f"server-{door}.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, "server.py", str(port), door],
            cwd=tmp,
            env=python_env() | {"COLUMNS": "1000"},  # the SDK's rich log, one record a line
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_listening(proc, port, log, timeout=60, what=f"{name} server")
        yield name, f"http://127.0.0.1:{port}/mcp", log
    finally:
        stop_process(proc)


def test_the_new_field_is_read_through_the_stubs_on_both_faces(
    served: tuple[str, str, Path],
) -> None:
    """R-GET-1 on the core face, X-GET-1 on the extension's: the completed task the server
    answers carries ``resultSummary``, and the typed client reads it."""
    name, url, _ = served
    run = subprocess.run(
        [sys.executable, "client.py", url],
        cwd=served[2].parent,
        env=python_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [f"core: {CORE_SUMMARY}", f"extension: {EXT_SUMMARY}"]


def test_a_new_revision_is_served_with_one_line_at_start(served: tuple[str, str, Path]) -> None:
    name, _, log = served
    lines = [ln for ln in log.read_text().splitlines() if "does not know" in ln]
    if name == "acme_tasks":
        assert lines == []
        return
    (line,) = lines
    assert f"handlers: Extension (acme_next): revision {NEXT}, which this runtime" in line
    assert "is served with the rules of its revision 2026-07-28" in line


def test_a_typed_client_of_the_other_face_is_refused_in_one_line(
    packages: dict[str, Path],
) -> None:
    """A session on 2025-11-25 does not speak the extension's stubs (X-COMPAT-4): refused
    before anything is sent, naming the face to connect with."""
    import importlib

    from mcp_tasks.runtime.client.requestor import TaskNotSupported
    from mcp_tasks.runtime.client.typed import check_face
    from testkit.importing import imported

    with imported(packages["acme_next"], "acme_next"):
        wire = importlib.import_module("acme_next.extension.client").WIRE
        check_face(wire, "2026-07-28")
        with pytest.raises(TaskNotSupported) as refused:
            check_face(wire, "2025-11-25")
    message = str(refused.value)
    assert "\n" not in message and f"revision {NEXT} (extension)" in message
    assert "connect with face='2026-07-28'" in message


@pytest.mark.anyio
async def test_the_stock_client_s_extension_is_a_transport_too(
    served: tuple[str, str, Path],
) -> None:
    """The stock ``mcp.Client`` with our ``TasksClientExtension``: its requestor carries the
    typed client of the user's package (X-CAP-1 declared on each request, X-GET-1)."""
    import importlib

    import anyio
    from mcp import Client

    from mcp_tasks.runtime.client.extension import TasksClientExtension
    from testkit.importing import imported

    name, url, log = served
    extension = TasksClientExtension()
    with imported(log.parent, name):
        client_module = importlib.import_module(f"{name}.extension.client")
        models = importlib.import_module(f"{name}.extension.models")
        async with Client(url, extensions=[extension]) as client:
            tasks = client_module.TasksClient(extension.requestor(client.session))
            created = await tasks.tools_call_task({"name": "count_to", "arguments": {"n": 1}})
            assert isinstance(created, models.CreateTaskResult)
            asked = models.GetTaskRequestParams(taskId=created.taskId)
            task = await tasks.tasks_get(asked)
            with anyio.fail_after(60):
                while not isinstance(task, models.GetTaskResultCompleted):
                    await anyio.sleep((task.pollIntervalMs or 100) / 1000)  # X-POLL-2
                    task = await tasks.tasks_get(asked)
    assert task.resultSummary == EXT_SUMMARY
