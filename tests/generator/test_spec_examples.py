"""Every JSON example of both seed files parses into the generated models and
serializes back to the identical JSON (fixtures extracted from ../shared/seeds/)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from .conftest import REPO

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
    import mcp_tasks.capabilities
    import mcp_tasks.errors
    import mcp_tasks.handlers
    import mcp_tasks.meta
    import mcp_tasks.methods
    import mcp_tasks.models

    return mcp_tasks


def test_every_seed_example_is_covered() -> None:
    assert len(INDEX) == 40
    assert {e["seed"] for e in INDEX} == {"zh", "ja"}


@pytest.mark.parametrize("entry", INDEX, ids=[e["file"] for e in INDEX])
def test_example_round_trips(entry: dict[str, Any], pkg: Any) -> None:
    data = json.loads((FIXTURES / entry["file"]).read_text())
    models = pkg.models
    kind, model = entry["kind"], entry["model"]
    if kind == "capabilities":
        side = "server" if model == "ServerCapabilities" else "client"
        tasks = data["capabilities"]["tasks"]
        cap_model = pkg.capabilities.CAPABILITY_MODELS[side]
        _same(cap_model.model_validate(tasks), tasks)
        assert pkg.capabilities.build_tasks_capability(side) == tasks  # R-CAP-2: what we declare
    elif kind == "request" and entry["method"] in pkg.methods.METHODS:
        _same(pkg.methods.parse_request(data), data)
    elif kind == "request":
        # A task-augmented request of a non-task method (tools/call): its `task` param (R-CREATE-1).
        assert entry["method"] in pkg.methods.AUGMENTABLE
        _same(models.TaskMetadata.model_validate(data["params"]["task"]), data["params"]["task"])
    elif kind == "notification":
        _same(pkg.methods.parse_notification(data), data)
    elif kind == "response":
        result_model = getattr(models, model)
        _same(result_model.model_validate(data["result"]), data["result"])
    elif kind == "other" and model == "RelatedTaskMetadata":
        _same(pkg.meta.TaskMeta.model_validate(data), data)
        task_id = data["io.modelcontextprotocol/related-task"]["taskId"]
        assert pkg.meta.related_task_meta(task_id) == data  # R-META-1
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
    for model in (pkg.models.Task, pkg.models.GetTaskResult, pkg.models.CancelTaskResult):
        _same(model.model_validate(task), task)
    _same(pkg.models.CreateTaskResult.model_validate({"task": task}), {"task": task})
