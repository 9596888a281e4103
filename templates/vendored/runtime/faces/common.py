"""What the two faces share: a task as wire JSON (each face names two fields its own way), a
handler's result validators, and the start of a hook's task on the engine. Both
:mod:`.core` and :mod:`.extension` import it; neither reaches into the other."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from functools import cache
from typing import Any

from pydantic import BaseModel, TypeAdapter

from ... import protocol
from ...core.handlers import AugmentedRequest, RequestContext
from ...errors import InvalidParams
from ...store import TaskRecord, rfc3339
from ..engine.limits import DEFAULT, Default, json_size
from ..engine.task_engine import TaskEngine

__all__ = ["result_builders", "start_work", "task_json", "wire_ready"]


def task_json(
    rec: TaskRecord, *, ttl: str = "ttl", poll_interval: str = "pollInterval"
) -> dict[str, Any]:
    """The task as wire JSON (the fields of ``Task``); hot on every ``tasks/get``. The
    tasks extension names two of the fields otherwise (``ttlMs``, ``pollIntervalMs``)."""
    out: dict[str, Any] = {
        "taskId": rec.task_id,
        "status": rec.status.value,
        "createdAt": rfc3339(rec.created_at),
        "lastUpdatedAt": rfc3339(rec.last_updated_at),
        ttl: rec.ttl_ms,
    }
    if rec.poll_interval_ms is not None:
        out[poll_interval] = rec.poll_interval_ms
    if rec.status_message is not None:
        out["statusMessage"] = rec.status_message
    return out


def wire_ready(cls: Any, own: Any, methods: Iterable[str]) -> bool:
    """Whether a face's handler class ``cls`` answers ``methods`` as wire JSON that its result
    models would dump exactly as it is: it has the result models of ``own``, the
    ``TasksHandlerBase`` of this package's bindings (``tests/runtime``), so the model need
    not be built to be dumped again; on another package's, every answer is built as its
    model."""
    return cls.created is own.created and all(
        cls.results.get(m) is own.results.get(m) for m in methods
    )


def result_builders(results: Mapping[str, Any]) -> dict[str, Callable[[Any], Any]]:
    """Per method, the function that validates a result as the type ``results`` gives for it
    (a handler's bindings' model, or union of models), chosen once: a model's own
    ``model_validate``, else a ``TypeAdapter``'s."""
    return {method: _builder(kind) for method, kind in results.items()}


@cache
def _builder(kind: Any) -> Callable[[Any], Any]:
    if isinstance(kind, type) and issubclass(kind, BaseModel):
        return kind.model_validate
    return TypeAdapter(kind).validate_python


async def start_work(
    engine: TaskEngine,
    request: AugmentedRequest[Any],
    ctx: RequestContext,
    face: str,
    *,
    tool_error: protocol.TaskStatus,
    ttl_ms: int | None | Default = DEFAULT,
) -> TaskRecord:
    """The task of a hook's request, stored before it returns with its ``work`` started
    (R-CREATE-2, X-CREATE-3): the body of every hook of a face's default handler. It counts
    against ``ctx.budget`` among the tasks and bytes kept, its params' bytes while its work
    (which holds them) runs (R-SEC-4)."""
    work = request.work
    if work is None:
        raise InvalidParams(detail=f"{request.method}: nothing to run as a task")
    tool = request.params.get("name") if request.method == protocol.TOOLS_CALL else None
    return await engine.start(
        ctx.requestor,
        face,
        request.method,
        work,
        ttl_ms=ttl_ms,
        tool_error=tool_error,
        progress_token=ctx.progress_token,
        tool=tool if isinstance(tool, str) else None,
        budget=ctx.budget,
        held_bytes=json_size(dict(request.params)),
    )
