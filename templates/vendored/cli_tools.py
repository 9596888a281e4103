"""What ``mcptask call`` checks before it calls, and ``mcptask tools``: the tool is listed
(else one line naming the server's tools), it runs as a task when asked to (R-TOOL-2: the
2025-11-25 handshake's ``taskSupport``, also asked for the tasks extension, whose
``tools/list`` does not say), and a detached task outlives the run (R-SEC-1: a task bound
to the session is cancelled when the session ends). Refusals are ``Usage`` (exit 2)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from .cli_common import Usage, headers_of
from .protocol import TASK_SUPPORT_FORBIDDEN

__all__ = ["check_call", "list_tools"]

#: opens a session on the 2025-11-25 handshake (a second connection to the same TARGET)
OpenCore = Callable[[], Any]

_NO_TASK = "tool {!r} does not run as a task on this server; call it without --task"
_DETACH_SESSION = (
    "--detach without --token: this server binds the task to this run's session, which"
    " ends (cancelling the task) when mcptask exits; pass --token TOKEN (a server started"
    " with --tokens), use --protocol 2026-07-28 (its tasks are not bound to a session), or"
    " drop --detach to wait for the result"
)
_DETACH_UNCHECKED = (
    "--detach: this server does not check bearer tokens (it answers a request without one),"
    " so --token does not keep the task: it is bound to this run's session and cancelled"
    " when mcptask exits; start the server with --tokens FILE, use --protocol 2026-07-28"
    " (its tasks are not bound to a session), or drop --detach to wait for the result"
)


async def _checks_tokens(target: str, given: list[str]) -> bool:
    """Whether the server refuses a request without a bearer token (401): only then does
    it bind tasks to the token's subject rather than to the session. The run's other
    headers (``--header``) go with it."""
    from .runtime.client.retry import http_client

    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    headers = {**(headers_of(None, given) or {}), "Accept": "application/json, text/event-stream"}
    async with http_client() as client:
        response = await client.post(target, json=ping, headers=headers)
    return int(response.status_code) == 401


async def _supports(requestor: Any) -> dict[str, str]:
    """Each listed tool's task support on the 2025-11-25 face (forbidden where the server
    does not declare task-augmented tools/call: R-CAP-3, R-TOOL-1)."""
    return {
        t.name: (
            await requestor.task_support(t.name)
            if await requestor.may_call_as_task(t.name)
            else TASK_SUPPORT_FORBIDDEN
        )
        for t in await requestor.tools()
    }


async def _core_support(open_core: OpenCore) -> dict[str, str] | None:
    """Each tool's task support as the 2025-11-25 handshake declares it. None when the
    server does not speak it, or declares no tasks there (then nothing is known: the
    server decides)."""
    try:
        async with open_core() as session:
            if session.initialize_result.capabilities.tasks is None:
                return None
            return await _supports(session.tasks)
    except Exception:  # no such handshake there: nothing is known
        return None


async def check_call(
    args: argparse.Namespace, requestor: Any, session_bound: bool, open_core: OpenCore
) -> None:
    """Refuses (``Usage``) a ``call`` that cannot be made as asked, before any is made.
    ``session_bound``: the server made a Streamable HTTP session (a stateless one keeps a
    task: there is no session to end)."""
    if await requestor.tool(args.tool) is None:
        names = ", ".join(t.name for t in await requestor.tools()) or "none"
        raise Usage(f"no tool {args.tool!r} on this server; its tools: {names}")
    if not (args.task or args.detach):
        return
    if requestor.ext is not None:
        support = await _core_support(open_core)
        if support is not None and support.get(args.tool) == TASK_SUPPORT_FORBIDDEN:
            raise Usage(_NO_TASK.format(args.tool))
        return  # the extension's tasks are not bound to a session
    if not await requestor.may_call_as_task(args.tool):
        raise Usage(_NO_TASK.format(args.tool))
    if args.detach and session_bound:  # a subject's task outlives the session
        if not args.token:
            raise Usage(_DETACH_SESSION)
        if not await _checks_tokens(args.target, getattr(args, "header", [])):
            raise Usage(_DETACH_UNCHECKED)


async def list_tools(session: Any, open_core: OpenCore) -> int:
    """``mcptask tools``: name, whether it runs as a task (no, optional, required; ? when
    the server does not say), the first line of the description."""
    requestor = session.tasks
    tools = await requestor.tools()
    if requestor.ext is None:
        support = await _supports(requestor)
    else:
        support = await _core_support(open_core) or {}
    rows = []
    for tool in tools:
        task = support.get(tool.name, "?")
        text = (tool.description or "").strip()
        first = text.splitlines()[0] if text else ""
        rows.append((tool.name, "no" if task == TASK_SUPPORT_FORBIDDEN else task, first))
    width = max([len("TOOL"), *(len(r[0]) for r in rows)])
    print(f"{'TOOL':<{width}}  {'TASK':<8}  DESCRIPTION")
    for name, task, first in rows:
        print(f"{name:<{width}}  {task:<8}  {first}".rstrip())
    if not rows:
        print("mcptask: this server lists no tools", file=sys.stderr)
    return 0
