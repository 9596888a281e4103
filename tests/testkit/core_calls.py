"""Engine-level calls of the core face, through its default handler (``CoreTasks``), as a
front door makes them: a task-augmented request with its work, and a ``tasks/*`` request
(with the request's own stream for input requests, when ``on_input`` is given)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from mcp_tasks.core.handlers import RequestContext
from mcp_tasks.runtime import CoreTasks, TaskEngine


@dataclass(frozen=True)
class Asked:
    """An input request as the requestor receives it on the ``tasks/result`` stream."""

    method: str
    params: dict[str, Any]


OnInput = Callable[[Asked], Awaitable[dict[str, Any]]]


async def create_task(
    engine: TaskEngine,
    ctx: RequestContext,
    method: str,
    work: Callable[[Any], Awaitable[dict[str, Any]]],
    *,
    task: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``CreateTaskResult`` of a task-augmented ``method`` whose work is ``work``."""
    params = {"task": {} if task is None else task}
    return await CoreTasks(engine).dispatch_augmented(method, params, ctx, work=work)


async def handle(
    engine: TaskEngine,
    method: str,
    params: Mapping[str, Any] | None,
    ctx: RequestContext,
    *,
    on_input: OnInput | None = None,
) -> dict[str, Any]:
    """The wire result of a ``tasks/*`` request; ``on_input`` answers its input requests."""
    if on_input is not None:
        answer = on_input

        async def send(method: str, params: dict[str, Any]) -> dict[str, Any]:
            return await answer(Asked(method, params))

        ctx = replace(ctx, send_request=send)
    return await CoreTasks(engine).dispatch(method, params, ctx)
