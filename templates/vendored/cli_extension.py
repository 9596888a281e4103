"""``mcptask`` on the tasks extension's revision (2026-07-28, ``io.modelcontextprotocol/tasks``):
``call`` lets the server decide (a task, polled at ``pollIntervalMs`` with its input requests
answered through ``tasks/update``, or the result at once), ``tasks get|cancel`` use the
extension's requests, ``tasks result`` polls ``tasks/get`` to the end, ``tasks list`` is
refused (the extension has none: X-COMPAT-4). Used by ``cli`` when that revision was
negotiated; refusals are ``TaskNotSupported`` (exit 2). What both faces share is
``cli_common``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import anyio

from .cli_common import (
    Progress,
    StatusLine,
    coerce_arguments,
    interruptible,
    print_json,
    print_result,
)
from .protocol import REVISION
from .runtime.client.requestor import TaskNotSupported
from .runtime.client.status import progress_of_status

__all__ = ["run_ext"]


async def _run_task(
    args: argparse.Namespace,
    ext: Any,
    arguments: dict[str, Any],
    progress: Progress,
    schema: Any = None,
) -> int:
    """``call`` on the tasks extension: the server decides (a task, or the result at once)."""
    if (args.task or args.detach) and not ext.server_offers_tasks():
        raise TaskNotSupported("the server does not offer the tasks extension: no task possible")
    if args.ttl is not None:
        print(
            "mcptask: note: --ttl is not sent (the extension's server sets ttlMs)", file=sys.stderr
        )
    task_id: str | None = None
    answer: Any = None

    async def body(line: StatusLine) -> None:
        nonlocal task_id, answer
        meta = {"progressToken": progress.token}
        answer = await ext.call_tool(args.tool, arguments, meta=meta)
        if hasattr(answer, "taskId"):
            task_id = answer.taskId
            if args.detach:
                print(task_id)
                return
            # the task's progress is its statusMessage on this face (X-NOTIF-7): shown as
            # the progress part of the line, as the 2025-11-25 face shows its notifications
            follow = progress_of_status(line.show, line.report)
            answer = await ext.tool_result(task_id, first=answer, on_status=follow)

    if await interruptible(progress, body):
        if task_id is not None:
            with anyio.move_on_after(10, shield=True):
                await ext.cancel(task_id)  # tasks/cancel: an ack, the status settles later
                status = getattr((await ext.get(task_id)).status, "value", "?")
                print(f"mcptask: interrupted; task {task_id} is {status}", file=sys.stderr)
        return 130
    if args.detach and task_id is not None:
        return 0
    return print_result(answer, args.tool, arguments, schema)


async def run_ext(args: argparse.Namespace, session: Any, progress: Progress) -> int:
    """The tasks extension's revision (2026-07-28): its own requests, no tasks/list."""
    requestor = session.tasks
    ext = requestor.ext
    if args.command == "call":
        tool = await requestor.tool(args.tool)
        schema = tool.input_schema if tool else None
        arguments = coerce_arguments(args.arguments, schema)
        return await _run_task(args, ext, arguments, progress, schema)
    if args.action == "list":
        raise TaskNotSupported(
            f"tasks list does not exist on protocol {session.protocol_version} (the tasks "
            f"extension has no tasks/list); try --protocol {REVISION}"
        )
    if args.action == "get":
        print_json(await ext.get(args.task_id))
    elif args.action == "result":
        print_json(await requestor.result(args.task_id))  # polls tasks/get to the end
    elif args.action == "cancel":
        await ext.cancel(args.task_id)  # an empty ack (X-CAN-3); show where the task is
        print_json(await ext.get(args.task_id))
    return 0
