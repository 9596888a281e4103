"""The FastMCP 4 client (``fastmcp-tasks`` registers its tasks client extension on every
FastMCP ``Client``) driving the example server's tools on a 2026-07-28 server. Runs in the
peer's own virtualenv (``testkit.fastmcp_peer``):

    tests/interop/.venv-fastmcp/bin/python tests/testkit/fastmcp_client.py URL

Prints ONE JSON object on its last line:

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
from fastmcp_tasks import call_tool_task

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


def main() -> None:
    result = anyio.run(drive, sys.argv[1])
    print(json.dumps(result, default=str))


if __name__ == "__main__":
    main()
