"""Every JSON example of both seed files parses into the generated models and
serializes back to the identical JSON (fixtures extracted from the seeds: the 2025-11-25 tasks
specification's texts); so does every valid message example of the tasks extension's spec
(docs/spec/tasks-extension.md §23)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from testkit.gen import REPO

FIXTURES = REPO / "tests" / "fixtures" / "spec_examples"
INDEX = json.loads((FIXTURES / "index.json").read_text())


def _wire(model: Any) -> str:
    return json.dumps(
        model.model_dump(mode="json", by_alias=True, exclude_unset=True), ensure_ascii=False
    )


def _same(model: Any, original: Any) -> None:
    """Identical JSON: the same values, keys and types (JSON objects are unordered, RFC 8259)."""
    assert json.loads(_wire(model)) == original
    assert _wire(model).count("null") == json.dumps(original).count("null")


@pytest.fixture(scope="module")
def pkg() -> Any:
    import mcp_tasks.core.capabilities
    import mcp_tasks.core.handlers
    import mcp_tasks.core.meta
    import mcp_tasks.core.methods
    import mcp_tasks.core.models
    import mcp_tasks.errors

    return mcp_tasks


def test_every_seed_example_is_covered() -> None:
    assert len(INDEX) == 40
    assert {e["seed"] for e in INDEX} == {"zh", "ja"}


@pytest.mark.parametrize("entry", INDEX, ids=[e["file"] for e in INDEX])
def test_example_round_trips(entry: dict[str, Any], pkg: Any) -> None:
    data = json.loads((FIXTURES / entry["file"]).read_text())
    models = pkg.core.models
    kind, model = entry["kind"], entry["model"]
    if kind == "capabilities":
        side = "server" if model == "ServerCapabilities" else "client"
        tasks = data["capabilities"]["tasks"]
        cap_model = pkg.core.capabilities.CAPABILITY_MODELS[side]
        _same(cap_model.model_validate(tasks), tasks)
        assert (
            pkg.core.capabilities.build_tasks_capability(side) == tasks
        )  # R-CAP-2: what we declare
    elif kind == "request" and entry["method"] in pkg.core.methods.METHODS:
        _same(pkg.core.methods.parse_request(data), data)
    elif kind == "request":
        # A task-augmented request of a non-task method (tools/call): its `task` param (R-CREATE-1).
        assert entry["method"] in pkg.core.methods.AUGMENTABLE
        _same(models.TaskMetadata.model_validate(data["params"]["task"]), data["params"]["task"])
    elif kind == "notification":
        _same(pkg.core.methods.parse_notification(data), data)
    elif kind == "response":
        result_model = getattr(models, model)
        _same(result_model.model_validate(data["result"]), data["result"])
    elif kind == "other" and model == "RelatedTaskMetadata":
        _same(pkg.core.meta.TaskMeta.model_validate(data), data)
        task_id = data["io.modelcontextprotocol/related-task"]["taskId"]
        assert pkg.core.meta.related_task_meta(task_id) == data  # R-META-1
    elif kind == "other":
        _same(getattr(models, model).model_validate(data), data)
    elif kind == "error":
        err = data["error"]
        errors = pkg.errors
        candidates = [
            errors.TaskAugmentationRequired(method="tools/call"),  # R-CREATE-5
            errors.TaskNotFound(),  # R-ERR-2
            errors.TaskExpired(),  # R-TTL-3
            errors.TaskAlreadyTerminal(status="completed"),  # R-CANCEL-1
        ]
        assert err in [c.to_error() for c in candidates], err
    else:  # pragma: no cover - a new fixture kind must be handled above
        pytest.fail(f"unhandled example kind {kind}")


def test_ttl_null_survives_a_round_trip(pkg: Any) -> None:
    task = {
        "taskId": "t1",
        "status": "working",
        "createdAt": "2025-11-25T10:30:00Z",
        "lastUpdatedAt": "2025-11-25T10:30:00Z",
        "ttl": None,
    }
    for model in (
        pkg.core.models.Task,
        pkg.core.models.GetTaskResult,
        pkg.core.models.CancelTaskResult,
    ):
        _same(model.model_validate(task), task)
    _same(pkg.core.models.CreateTaskResult.model_validate({"task": task}), {"task": task})


# The tasks extension io.modelcontextprotocol/tasks (spec/tasks-extension.md §23): every JSON
# example that is a valid message (fixtures extracted by heading ``#### EX-nn``). Left out,
# by design: fragments (EX-01, 02, 27-31), EX-04/EX-08 (core tools/call requests without the
# per-request envelope, A-14) and EX-26 (the stale -32003 code, A-13).
EXT_FIXTURES = REPO / "tests" / "fixtures" / "spec_examples_ext"
EXT_INDEX = json.loads((EXT_FIXTURES / "index.json").read_text())
EXT_SCHEMA = REPO / "schema" / "ext-tasks-2026-07-28" / "schema.json"


@pytest.fixture(scope="module")
def ext() -> Any:
    import mcp_tasks.extension.methods
    import mcp_tasks.extension.models

    return mcp_tasks.extension


def test_every_valid_extension_example_is_covered() -> None:
    assert len(EXT_INDEX) == 21
    examples = {e["example"] for e in EXT_INDEX}
    assert {"EX-05", "EX-07", "EX-13", "EX-16", "EX-17", "EX-21", "EX-24", "EX-25"} <= examples


def _schema_valid(definition: str, value: Any) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    defs = json.loads(EXT_SCHEMA.read_text())["$defs"]
    validator = jsonschema.Draft202012Validator({"$ref": f"#/$defs/{definition}", "$defs": defs})
    assert not list(validator.iter_errors(value))


@pytest.mark.parametrize("entry", EXT_INDEX, ids=[e["file"] for e in EXT_INDEX])
def test_extension_example_round_trips(entry: dict[str, Any], ext: Any) -> None:
    data = json.loads((EXT_FIXTURES / entry["file"]).read_text())
    kind, model, method = entry["kind"], entry["model"], entry["method"]
    if kind == "request":
        _schema_valid(model, data)
        parsed = ext.methods.parse_request(data)
        assert type(parsed).__name__ == model
        _same(parsed, data)
    elif kind == "notification":
        _schema_valid(model, data)
        parsed = ext.methods.parse_notifications_tasks(data)
        _same(parsed, data)  # the params: the variant of its status (X-NOTIF-3)
        variant = ext.methods.VARIANTS["TaskStatusNotificationParams"][data["params"]["status"]]
        assert type(parsed.params) is variant
    elif kind == "response" and method == "tools/call":
        # X-RT-1: a created task's answer is flat, resultType "task" (EX-24 and EX-25 carry
        # result/error too, A-1: open members kept as they are, never emitted: X-CREATE-6)
        _schema_valid(model, data["result"])
        parsed = ext.methods.parse_create_task_result(data["result"])
        _same(parsed, data["result"])
    elif kind == "response":
        _schema_valid(model, data["result"])
        parsed = ext.methods.RESULTS[method](data["result"])
        if "status" in data["result"]:  # X-GET-1..3: the variant of the status
            union = ext.methods.VARIANTS[model]
            assert type(parsed) is union[data["result"]["status"]]
        _same(parsed, data["result"])
    elif kind == "error":
        import mcp_tasks.errors as errors

        error = getattr(errors, model)()
        assert error.to_error() == data["error"]  # X-CAP-8 (data), X-GET-8, X-TTL-5
        assert type(errors.error_from_payload(data["error"])) is type(error)
    else:  # pragma: no cover - a new fixture kind must be handled above
        pytest.fail(f"unhandled example kind {kind}")
