"""The installed runtime and a package a user generated (the default output: bindings only).

A handler written on the user's bases is adopted: its requests are parsed with its own
package's models, its package's errors become the runtime's with the same code and message,
and a package the runtime cannot serve (another bindings API, a revision it does not know) is
refused at start with one line naming both. The same handlers served over HTTP by real clients:
``tests/mcp/test_handlers_served.py`` (the ``-userpkg`` examples)."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

from mcp_tasks import errors as our_errors
from mcp_tasks._handlers import RequestContext
from mcp_tasks.runtime import TaskEngine
from mcp_tasks.runtime.faces.adopt import Adopted, adopt
from mcp_tasks.runtime.faces.core import CoreTasksMixin
from mcp_tasks.runtime.faces.extension import ExtensionTasksMixin
from mcp_tasks.runtime.serve.server import face_handlers
from testkit.gen import PINNED, run_cli
from testkit.importing import import_package, unload

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def userpkg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    out = tmp_path_factory.mktemp("user") / "userpkg"
    assert run_cli(*PINNED, "-o", out).exit_code == 0
    pkg = import_package(out.parent, "userpkg")
    for module in ("core.handlers", "extension.handlers", "errors", "descriptor"):
        importlib.import_module(f"userpkg.{module}")
    yield pkg
    unload("userpkg")


def ctx() -> RequestContext:
    return RequestContext(requestor="alice", request_id=1)


async def test_a_handler_on_the_users_bases_parses_with_its_own_models_R_GET_1(
    userpkg: Any,
) -> None:
    seen: list[object] = []

    class Mine(userpkg.core.handlers.TasksHandlerBase):  # type: ignore[misc]
        async def tasks_get(self, params: Any, ctx: Any) -> Any:
            seen.append(params)
            seen.append(ctx)
            raise userpkg.errors.TaskNotFound(data={"taskId": params.taskId})

    handler = adopt(Mine())
    assert isinstance(handler, Adopted) and handler.serves("tasks/get")
    assert not handler.serves("tasks/list")  # not overridden: not advertised (R-CAP-1)
    with pytest.raises(our_errors.TaskNotFound) as err:
        await handler.dispatch("tasks/get", {"taskId": "t-1"}, ctx())
    assert isinstance(seen[0], userpkg.core.models.GetTaskRequestParams)
    assert isinstance(seen[1], userpkg._handlers.RequestContext) and seen[1].requestor == "alice"
    native = userpkg.errors.TaskNotFound(data={"taskId": "t-1"}).to_error()
    assert err.value.to_error() == native  # same code, message and data
    with pytest.raises(our_errors.MethodNotFound):  # a stub of its base: -32601
        await handler.dispatch("tasks/list", {}, ctx())
    with pytest.raises(our_errors.InvalidParams):  # its own models validate (R-GET-1)
        await handler.dispatch("tasks/get", {"taskId": 7}, ctx())


async def test_the_default_handlers_on_the_users_bases_answer_with_its_classes(
    userpkg: Any,
) -> None:
    class Core(CoreTasksMixin, userpkg.core.handlers.TasksHandlerBase):  # type: ignore[misc]
        pass

    class Ext(ExtensionTasksMixin, userpkg.extension.handlers.TasksHandlerBase):  # type: ignore[misc]
        pass

    async def work(_: Any) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": "done"}]}

    async with TaskEngine() as engine:
        handlers = face_handlers(engine, [Core(engine), Ext(engine)])
        core, ext = handlers["2025-11-25"], handlers["2026-07-28"]
        assert isinstance(core, Adopted) and isinstance(ext, Adopted)
        created = await core.dispatch_augmented(
            "tools/call", {"name": "t", "task": {}}, ctx(), work=work
        )
        task_id = created["task"]["taskId"]
        got = await core.handler.tasks_get(
            userpkg.core.models.GetTaskRequestParams(taskId=task_id), ctx()
        )
        assert isinstance(got, userpkg.core.models.GetTaskResult)
        done = await core.dispatch("tasks/result", {"taskId": task_id}, ctx())
        assert done["content"][0]["text"] == "done"
        made = await ext.dispatch_augmented("tools/call", {"name": "t"}, ctx(), work=work)
        polled = await ext.handler.tasks_get(
            userpkg.extension.models.GetTaskRequestParams(taskId=made["taskId"]), ctx()
        )
        assert type(polled).__module__ == "userpkg.extension.models"


def test_a_package_the_runtime_cannot_serve_is_refused_in_one_line(
    userpkg: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Mine(userpkg.core.handlers.TasksHandlerBase):  # type: ignore[misc]
        face = "2099-01-01"

    with pytest.raises(TypeError) as err:
        adopt(Mine())
    message = str(err.value)
    assert "\n" not in message and "2099-01-01" in message and "userpkg" in message
    assert "2025-11-25" in message and "2026-07-28" in message  # what this runtime serves

    monkeypatch.setattr(userpkg.descriptor, "BINDINGS_API", 99)
    with pytest.raises(TypeError) as err:
        adopt(userpkg.core.handlers.TasksHandlerBase())
    message = str(err.value)
    assert "\n" not in message and "bindings API 99" in message and "bindings API 1" in message

    with pytest.raises(TypeError, match="not a subclass of a generated TasksHandlerBase"):
        adopt(object())


def test_a_package_that_does_not_accept_this_runtime_s_version_is_refused_in_one_line(
    userpkg: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A package names the runtime versions that serve it (``RUNTIME_REQUIRES``, from the
    version of the generator that wrote it); a runtime of another version refuses its handlers
    in one line naming both versions: here a package written by a later generator, and a
    runtime of a later (simulated) version."""
    from mcp_tasks import descriptor as own
    from mcptask_gen import runtime_requirement

    assert userpkg.descriptor.RUNTIME_REQUIRES == runtime_requirement(own.GENERATOR_VERSION)

    class Core(CoreTasksMixin, userpkg.core.handlers.TasksHandlerBase):  # type: ignore[misc]
        pass

    later = runtime_requirement("0.2.0")
    monkeypatch.setattr(userpkg.descriptor, "RUNTIME_REQUIRES", later)
    with pytest.raises(TypeError) as err:
        adopt(Core(TaskEngine()))
    message = str(err.value)
    assert "\n" not in message
    assert f"needs {later}" in message and "mcptask-runtime>=0.2.0,<0.3" in message
    assert f"this runtime is mcptask-runtime {own.GENERATOR_VERSION}" in message

    monkeypatch.undo()
    monkeypatch.setattr(own, "GENERATOR_VERSION", "0.3.1")  # a later runtime
    with pytest.raises(TypeError) as err:
        adopt(Core(TaskEngine()))
    message = str(err.value)
    assert "\n" not in message and "this runtime is mcptask-runtime 0.3.1" in message
    assert f"needs {userpkg.descriptor.RUNTIME_REQUIRES}" in message

    monkeypatch.setattr(own, "GENERATOR_VERSION", "0.1.7")  # a later patch release serves it
    assert isinstance(adopt(Core(TaskEngine())), Adopted)


@pytest.mark.parametrize(
    ("requirement", "version", "accepted"),
    [
        ("mcptask-runtime>=0.1.0,<0.2", "0.1.0", True),
        ("mcptask-runtime>=0.1.0,<0.2", "0.1.12", True),
        ("mcptask-runtime>=0.1.0,<0.2", "0.2.0", False),
        ("mcptask-runtime>=0.1.3,<0.2", "0.1.2", False),
        ("mcptask-runtime>=1.2.0,<2", "1.9.0", True),
        ("mcptask-runtime>=1.2.0,<2", "2.0.0", False),
        ("mcptask-runtime>=0.1.0,<0.2", "0.1.0rc1", True),  # release numbers compare
        ("mcptask-runtime>=0.1.0,~0.2", "0.1.0", False),  # a clause it cannot read: refuse
    ],
)
def test_which_runtime_versions_a_requirement_accepts(
    requirement: str, version: str, accepted: bool
) -> None:
    from mcp_tasks.runtime.faces.adopt import accepts

    assert accepts(requirement, version) is accepted


def test_the_generator_names_its_own_minor_line() -> None:
    from mcptask_gen import runtime_requirement

    assert runtime_requirement("0.1.0") == "mcptask-runtime>=0.1.0,<0.2"
    assert runtime_requirement("0.4.2") == "mcptask-runtime>=0.4.2,<0.5"
    assert runtime_requirement("1.2.3") == "mcptask-runtime>=1.2.3,<2"
