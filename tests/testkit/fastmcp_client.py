"""The FastMCP 4 client (``fastmcp-tasks`` registers its tasks client extension on every
FastMCP ``Client``) driving the example server's tools on a 2026-07-28 server. Runs in the
peer's own virtualenv (``testkit.fastmcp_peer``):

    tests/interop/.venv-fastmcp/bin/python tests/testkit/fastmcp_client.py URL
    tests/interop/.venv-fastmcp/bin/python tests/testkit/fastmcp_client.py URL --subjects A B

Prints ONE JSON object on its last line. With ``--subjects TOKEN_A TOKEN_B`` (bearer
tokens of two subjects), what each FastMCP client got for a task of A's (see
:func:`subjects`); otherwise:

- ``protocol_version``: what the client negotiated;
- ``calls``: tool -> ``{"is_error", "text"}`` for ``client.call_tool`` (tasks are created,
  polled, answered through ``tasks/update`` and resolved by FastMCP transparently), or
  ``{"raised": "Type: message"}``;
- ``handle``: an explicit task (``call_tool_task`` on ``slow_compute(10)``): its id, status,
  the status after ``tasks/cancel``, or ``raised`` when the server answered without a task;
- ``asked``: the elicitation messages the server sent (answered ``accept`` with
  ``{"confirm": true, "name": "Ada"}``).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
from fastmcp import Client
from fastmcp.client.elicitation import ElicitResult
from fastmcp_tasks import ToolTask, call_tool_task

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("greet", {"name": "Ada"}),
    ("slow_compute", {"seconds": 0.5, "label": "fastmcp"}),
    ("confirm_delete", {"filename": "a.txt"}),
    ("multi_input", {}),
    ("failing_job", {}),
    ("protocol_error_job", {}),
    ("test_tool_with_task", {}),
]


def _raised(exc: BaseException) -> dict[str, str]:
    return {"raised": f"{type(exc).__name__}: {exc}"}


async def drive(url: str) -> dict[str, Any]:
    asked: list[str] = []

    async def on_elicit(message: str, response_type: Any, params: Any, context: Any) -> Any:
        asked.append(message)
        return ElicitResult(action="accept", content={"confirm": True, "name": "Ada"})

    out: dict[str, Any] = {"calls": {}, "asked": asked}
    async with Client(url, elicitation_handler=on_elicit) as client:
        out["protocol_version"] = getattr(client.session, "protocol_version", None)
        for tool, args in CALLS:
            try:
                with anyio.fail_after(60):
                    r = await client.call_tool(tool, args, raise_on_error=False)
                texts = [getattr(c, "text", None) for c in r.content]
                out["calls"][tool] = {"is_error": r.is_error, "text": texts}
            except Exception as exc:  # report, go on with the next tool
                out["calls"][tool] = _raised(exc)
        try:
            with anyio.fail_after(60):
                task = await call_tool_task(client, "slow_compute", {"seconds": 10})
                handle: dict[str, Any] = {"task_id": task.task_id}
                handle["status"] = str((await task.status()).status)
                await task.cancel()
                handle["after_cancel"] = str((await task.status()).status)
        except Exception as exc:
            handle = _raised(exc)
        out["handle"] = handle
    return out


def _outcome(exc: BaseException) -> dict[str, Any]:
    """A refusal as the client saw it: the JSON-RPC error's code and message."""
    error = getattr(exc, "error", None)
    return {
        "code": getattr(exc, "code", getattr(error, "code", None)),
        "message": getattr(error, "message", str(exc)),
    }


async def _try(step: Any) -> dict[str, Any]:
    try:
        with anyio.fail_after(60):
            return {"status": str((await step()).status)}
    except Exception as exc:
        return {"refused": _outcome(exc)}


async def subjects(url: str, token_a: str, token_b: str) -> dict[str, Any]:
    """A's client starts ``slow_compute(60)`` as a task; B's client asks for it and cancels
    it; a second client of A's (a new connection, the same subject) reads it, cancels it
    and reads it again. Also B's answer for an id nobody has. Each step: ``{"status"}`` or
    ``{"refused": {"code", "message"}}``."""
    out: dict[str, Any] = {}
    async with Client(url, auth=token_a) as a, Client(url, auth=token_b) as b:
        with anyio.fail_after(60):
            task = await call_tool_task(a, "slow_compute", {"seconds": 60})
        out["created"] = str((await task.status()).status)
        foreign = ToolTask(b, "slow_compute", task.create_result)
        out["b_get"] = await _try(foreign.status)
        out["b_cancel"] = await _try(lambda: _cancelled(foreign))
        nobody = task.create_result.model_copy(update={"task_id": "no-such-task"})
        out["b_unknown"] = await _try(ToolTask(b, "slow_compute", nobody).status)
        async with Client(url, auth=token_a) as again:
            mine = ToolTask(again, "slow_compute", task.create_result)
            out["a_get"] = await _try(mine.status)
            out["a_cancel"] = await _try(lambda: _cancelled(mine))
        out["a_after"] = await _try(task.status)  # the first connection sees the cancel
    return out


async def _cancelled(task: ToolTask) -> Any:
    await task.cancel()
    return await task.status()


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[2] == "--subjects":
        result = anyio.run(subjects, sys.argv[1], sys.argv[3], sys.argv[4])
    else:
        result = anyio.run(drive, sys.argv[1])
    print(json.dumps(result, default=str))


if __name__ == "__main__":
    main()
