"""The README's two handler examples, run as written against a real server, on both faces and
through both front doors (the task endpoint and the SDK's path), with real clients: our
``TaskRequestor`` (2025-11-25 and the extension), the stock ``mcp.Client`` in both modes, and
the TypeScript SDK's client.

(a) ``PoliteTasks`` / ``PoliteExtensionTasks``: subclasses of the default handlers that
override ``tasks/get`` (a status message while working) and ``tasks/cancel``, calling
``super()``. (b) ``JobTasks`` / ``JobExtensionTasks``: handlers from the generated bases
alone, over a job queue of the user's own (nothing of the engine): a task-augmented
``tools/call`` reaches their ``tools_call_task`` hook, what they do not override answers
``-32601`` and is not advertised (R-CAP-1, X-CAP-2).

Each example also runs on bindings a user generated (``mcptask-gen ... -o userpkg``, the
default output: no runtime), served by the installed runtime: (a) on ``CoreTasksMixin`` /
``ExtensionTasksMixin`` over ``userpkg``'s handler bases, whose results are ``userpkg``'s own
classes (the extension example's ``isinstance`` check on them holds), (b) from ``userpkg``'s
bases alone, raising ``userpkg``'s errors."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TypeAlias

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from mcp_tasks.core.meta import RELATED_TASK_KEY
from mcp_tasks.extension import protocol as ext
from mcp_tasks.runtime.client.extension import TasksClientExtension
from mcp_tasks.runtime.client.requestor import TaskRequestor, raw_request
from testkit.gen import SCHEMA, SCHEMA_EXT
from testkit.interop import npm_ci, run_node
from testkit.procs import free_port, python_env, stop_process, wait_listening

pytestmark = pytest.mark.anyio

#: the handlers reference page, where the two examples live
README = (Path(__file__).resolve().parents[2] / "docs" / "handlers.md").read_text()
DOORS = ("endpoint", "sdk")
QUEUED = "3 words, counted on the queue"
#: runs a README block's ``main(port, task_endpoint)`` (its ``__main__`` part serves at 8000)
RUNNER = (
    "import runpy, sys, anyio; ns = runpy.run_path(sys.argv[1], run_name='readme_example');"
    " anyio.run(ns['main'], int(sys.argv[2]), sys.argv[3] == 'endpoint')"
)
#: serves a README block's ``tasks`` over stdio, as docs/serving.md does (and runs the job
#: queue of (b) beside it); written beside the example and ``userpkg``, which it imports from
#: its own directory
STDIO_RUNNER = """import runpy, sys, anyio
from mcp_tasks.runtime.serve.server import run_stdio
ns = runpy.run_path(sys.argv[1], run_name="readme_example")
async def serve():
    async with ns["tasks"], anyio.create_task_group() as tg:
        if "queue" in ns:
            tg.start_soon(ns["queue"].run)
        await run_stdio(ns["mcp"])
        tg.cancel_scope.cancel()
anyio.run(serve)
"""
#: where a client reaches a served example: a Streamable HTTP URL, or the command serving it
#: over stdio (each connection its own server process)
Target: TypeAlias = str | StdioServerParameters


def readme_block(marker: str) -> str:
    """The first Python block after ``marker`` in the README."""
    return README.split(marker, 1)[1].split("```python\n", 1)[1].split("```", 1)[0]


def on_user_bindings(source: str) -> str:
    """An example rewritten on a generated package ``userpkg``: its protocol facts, models,
    errors and handler bases are ``userpkg``'s; the runtime (``mcp_tasks.runtime``) is the
    installed one; the default handlers become the mixins over ``userpkg``'s bases."""
    for module in ("protocol", "core", "extension", "errors"):
        source = source.replace(f"from mcp_tasks.{module}", f"from userpkg.{module}")
    source = source.replace(
        "from mcp_tasks import",
        "import userpkg.core.handlers\nimport userpkg.extension.handlers\nfrom userpkg import",
    )
    source = source.replace(
        "from mcp_tasks.runtime import CoreTasks, ExtensionTasks, TaskEngine",
        "from mcp_tasks.runtime import TaskEngine\n"
        "from mcp_tasks.runtime.faces.core import CoreTasksMixin\n"
        "from mcp_tasks.runtime.faces.extension import ExtensionTasksMixin\n"
        "from userpkg.core.handlers import TasksHandlerBase as CoreBase\n"
        "from userpkg.extension.handlers import TasksHandlerBase as ExtensionBase",
    )
    source = source.replace("(CoreTasks):", "(CoreTasksMixin, CoreBase):")
    source = source.replace("(ExtensionTasks):", "(ExtensionTasksMixin, ExtensionBase):")
    assert "from mcp_tasks.core" not in source and "from mcp_tasks.extension" not in source
    return source


EXAMPLES = {
    "subclass": readme_block("**(a) Change one rule"),
    "own-jobs": readme_block("**(b) Serve tasks from your own job system"),
}
EXAMPLES["subclass-userpkg"] = on_user_bindings(EXAMPLES["subclass"])
EXAMPLES["own-jobs-userpkg"] = on_user_bindings(EXAMPLES["own-jobs"])


#: every example through both HTTP doors; those on a generated ``userpkg`` over stdio too
#: (the README's own examples reach stdio through the example server's interop runs)
SERVED = [(e, d) for e in EXAMPLES for d in DOORS]
SERVED += [(e, "stdio") for e in EXAMPLES if e.endswith("-userpkg")]


@pytest.fixture(scope="module", params=SERVED, ids=str)
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Target]]:
    """(example, target): the README example served on a free port through ``door``, or the
    command serving it over stdio."""
    example, door = request.param
    tmp = tmp_path_factory.mktemp(f"{example}-{door}")
    source = tmp / "example.py"
    source.write_text(EXAMPLES[example])
    if example.endswith("-userpkg"):  # the user's bindings, generated beside the example
        made = subprocess.run(
            [sys.executable, "-m", "mcptask_gen", str(SCHEMA), str(SCHEMA_EXT), "-o", "userpkg"],
            cwd=tmp,
            capture_output=True,
            text=True,
        )
        assert made.returncode == 0, made.stderr
        assert not (tmp / "userpkg" / "runtime").exists()
    if door == "stdio":
        runner = tmp / "stdio_runner.py"
        runner.write_text(STDIO_RUNNER)
        yield (
            example,
            StdioServerParameters(
                command=sys.executable, args=[str(runner), str(source)], env=python_env(), cwd=tmp
            ),
        )
        return
    port = free_port()
    log = tmp / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", RUNNER, str(source), str(port), door],
            cwd=tmp,
            env=python_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_listening(proc, port, log, timeout=60, what=f"README example {example}")
        yield example, f"http://127.0.0.1:{port}/mcp"
    finally:
        stop_process(proc)


@asynccontextmanager
async def legacy(url: Target) -> AsyncIterator[Client]:
    async with Client(url, mode="legacy") as c:
        assert c.protocol_version == "2025-11-25"
        yield c


@asynccontextmanager
async def modern(url: Target) -> AsyncIterator[tuple[Client, TasksClientExtension]]:
    extension = TasksClientExtension()
    async with Client(url, extensions=[extension]) as c:
        assert c.session.protocol_version == ext.REVISION
        yield c, extension


def text_of(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


TOOL = {"subclass": ("report", {"quarter": "Q1", "seconds": 1}, "report for Q1")}
TOOL["own-jobs"] = ("count_words", {"text": "one two three"}, QUEUED)
TOOL["subclass-userpkg"], TOOL["own-jobs-userpkg"] = TOOL["subclass"], TOOL["own-jobs"]


async def test_our_requestor_on_the_2025_face_R_CREATE_2_R_RESULT_1(
    served: tuple[str, Target],
) -> None:
    example, url = served
    tool, arguments, expected = TOOL[example]
    async with legacy(url) as c:
        requestor = TaskRequestor(c.session)
        created = await requestor.call_tool_as_task(tool, arguments)
        seen = await requestor.get(created.task.taskId)
        if example.startswith("subclass"):  # the override of tasks/get, through super()
            assert seen.statusMessage == "Working on it: ask again in a moment"
        done = await requestor.wait(created.task.taskId)
        assert done.status.value == "completed"
        result = await requestor.tool_result(created.task.taskId)
        assert text_of(result) == expected
        assert (result.meta or {})[RELATED_TASK_KEY] == {"taskId": created.task.taskId}
        # the tool called plainly runs as usual (R-CREATE-4 without a task param)
        plain = await c.call_tool(tool, arguments)
        assert text_of(plain) != QUEUED


async def test_our_requestor_on_the_extension_face_X_CAP_4_X_GET_9(
    served: tuple[str, Target],
) -> None:
    example, url = served
    tool, arguments, expected = TOOL[example]
    async with modern(url) as (c, extension):
        requestor = extension.requestor(c.session)
        assert requestor.server_offers_tasks()  # X-CAP-2: the handler serves something
        created = await requestor.call_tool(tool, arguments)
        assert isinstance(created, ext.CreateTaskResult) and created.resultType == "task"
        first = await requestor.get(created.taskId)
        if example.startswith("subclass"):
            assert first.status == ext.WORKING
            assert first.statusMessage == "Working on it: ask again in a moment"
        result = await requestor.tool_result(created.taskId)
        assert text_of(result) == expected
        # the same through TaskRequestor, which picks the face from the session
        again = await TaskRequestor(c.session).run_tool(tool, arguments)
        assert text_of(again) == expected
        # the stock client's own call_tool, resolved by our extension
        assert text_of(await c.call_tool(tool, arguments)) == expected


async def test_stock_client_legacy_mode_raw_requests(served: tuple[str, Target]) -> None:
    """The stock client's own task wire types through its public ``send_request``."""
    example, url = served
    tool, arguments, expected = TOOL[example]
    async with legacy(url) as c:
        raw = await raw_request(
            c.session, "tools/call", {"name": tool, "arguments": arguments, "task": {}}
        )
        task_id = types.CreateTaskResult.model_validate(raw).task.task_id
        payload = types.GetTaskPayloadRequest(
            params=types.GetTaskPayloadRequestParams(task_id=task_id)
        )
        result = await c.session.send_request(payload, types.CallToolResult)
        assert text_of(result) == expected
        get = types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id))
        assert (await c.session.send_request(get, types.GetTaskResult)).status == "completed"


async def test_cancel_through_the_handler_R_CANCEL_2(served: tuple[str, Target]) -> None:
    example, url = served
    tool, arguments, _ = TOOL[example]
    slow = {**arguments, "seconds": 30} if example.startswith("subclass") else arguments
    async with legacy(url) as c:
        requestor = TaskRequestor(c.session)
        created = await requestor.call_tool_as_task(tool, slow)
        cancelled = await requestor.cancel(created.task.taskId)  # in its first minute
        assert cancelled.status.value == "cancelled"
    async with modern(url) as (c, extension):
        requestor = extension.requestor(c.session)
        made = await requestor.call_tool(tool, slow)
        assert isinstance(made, ext.CreateTaskResult)
        assert (await requestor.cancel(made.taskId)).resultType == "complete"
        assert (await requestor.wait(made.taskId)).status == ext.CANCELLED


async def test_what_is_not_overridden_is_neither_served_nor_advertised_R_CAP_1(
    served: tuple[str, Target],
) -> None:
    example, url = served
    async with legacy(url) as c:
        caps = c.server_capabilities.tasks
        assert caps is not None and caps.requests is not None and caps.cancel is not None
        if example.startswith("own-jobs"):  # JobTasks has no tasks_list
            assert caps.list is None
            with pytest.raises(MCPError) as err:
                await raw_request(c.session, "tasks/list", {})
            assert err.value.code == -32601
    if example.startswith("own-jobs"):  # JobExtensionTasks has no tasks_update
        async with modern(url) as (c, extension):
            with pytest.raises(MCPError) as err:
                await extension.requestor(c.session).update("any", {"k": {}})
            assert err.value.code == -32601


def test_typescript_sdk_client(served: tuple[str, Target], node_modules: None) -> None:
    example, target = served
    tool, arguments, expected = TOOL[example]
    if isinstance(target, str):
        out = run_node("ts_client.mjs", "task", target, tool, json.dumps(arguments))
    else:  # the server's command, then ``--`` and the scenario's own arguments
        command = ["stdio", target.command, *target.args, "--", tool, json.dumps(arguments)]
        out = run_node("ts_client.mjs", "task", *command)
    assert out["_rc"] == 0, out
    assert out["final"]["status"] == "completed"
    assert out["result"]["content"][0]["text"] == expected
    assert out["serverCapabilities"]["tasks"]["requests"]["tools"]["call"] == {}


@pytest.fixture(scope="session")
def node_modules() -> None:
    npm_ci()


async def test_served_answers_do_not_wait(served: tuple[str, Target]) -> None:
    """A created task is answered at once (R-CREATE-2): the hook does not run the work."""
    example, url = served
    tool, arguments, _ = TOOL[example]
    async with legacy(url) as c:
        with anyio.fail_after(10):
            slow = {**arguments, "seconds": 30} if example.startswith("subclass") else arguments
            created = await TaskRequestor(c.session).call_tool_as_task(tool, slow)
        assert created.task.status.value == "working"
