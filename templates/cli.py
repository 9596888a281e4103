"""``mcptask``: try an MCP server's tools and tasks by hand (built on ``runtime.mcp_client``).

    mcptask call TARGET TOOL [key=value ...] [--task] [--ttl MS] [--token TOKEN]
    mcptask tasks list   TARGET [--token TOKEN]
    mcptask tasks get    TARGET TASK_ID [--token TOKEN]
    mcptask tasks result TARGET TASK_ID [--token TOKEN]
    mcptask tasks cancel TARGET TASK_ID [--token TOKEN]

TARGET is a Streamable HTTP URL (``http://127.0.0.1:8000/mcp``) or a command that
serves MCP over stdio (``"python -m mcp_tasks.examples.server --stdio"``).
``key=value``: the value is parsed as JSON when it is valid JSON, else taken as a string.
With ``--task`` the call runs as a task and a live status line (on stderr) follows it,
polling at the server's ``pollInterval``. Elicitation requests are asked on the terminal.
Note: without ``--token``, servers bind tasks to the session, so ``tasks get`` in a
later invocation only finds tasks of an identity that outlives the session.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio

__all__ = ["main"]


def _parse_value(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _parse_arguments(pairs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"mcptask: expected key=value, got {pair!r}")
        out[key] = _parse_value(value)
    return out


class _StatusLine:
    """One line on stderr, rewritten as the task's status changes."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.last = ""

    def show(self, task: Any) -> None:
        message = f" - {task.statusMessage}" if task.statusMessage else ""
        line = f"task {task.taskId}: {task.status.value}{message}"
        if line == self.last:
            return
        self.last = line
        if self.tty:
            sys.stderr.write("\r\x1b[2K" + line)
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def done(self) -> None:
        if self.tty and self.last:
            sys.stderr.write("\n")
            sys.stderr.flush()


async def _ask(prompt: str) -> str:
    def read() -> str:
        sys.stderr.write(prompt)
        sys.stderr.flush()
        return sys.stdin.readline().strip()

    return await anyio.to_thread.run_sync(read)


async def _elicit(ctx: Any, params: Any) -> Any:
    import mcp_types as types

    sys.stderr.write(f"\nserver asks: {params.message}\n")
    schema = getattr(params, "requested_schema", None) or {}
    if not sys.stdin.isatty():
        return types.ElicitResult(action="decline")
    answer = (await _ask("accept? [y/N] ")).lower()
    if answer not in ("y", "yes"):
        return types.ElicitResult(action="decline")
    content: dict[str, Any] = {}
    props = schema.get("properties", {}) if isinstance(schema, dict) else {}
    for name, spec in props.items():
        kind = spec.get("type", "string") if isinstance(spec, dict) else "string"
        raw = await _ask(f"{name} ({kind}): ")
        if kind == "boolean":
            content[name] = raw.lower() in ("", "y", "yes", "true", "1")
        elif kind in ("number", "integer"):
            content[name] = _parse_value(raw or "0")
        else:
            content[name] = raw
    return types.ElicitResult(action="accept", content=content)


@asynccontextmanager
async def _connect(target: str, token: str | None) -> AsyncIterator[Any]:
    from .runtime.mcp_client import TasksClientSession

    if target.startswith(("http://", "https://")):
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        headers = {"Authorization": f"Bearer {token}"} if token else None
        async with httpx2.AsyncClient(
            headers=headers, timeout=httpx2.Timeout(60, read=None)
        ) as http:
            async with streamable_http_client(target, http_client=http) as (read, write):
                async with TasksClientSession(
                    read, write, elicitation_callback=_elicit, receive_tasks=False
                ) as session:
                    await session.initialize()
                    yield session
        return
    from mcp import StdioServerParameters, stdio_client

    argv = shlex.split(target)
    if not argv:
        raise SystemExit("mcptask: empty TARGET")
    params = StdioServerParameters(command=argv[0], args=argv[1:])
    async with stdio_client(params) as (read, write):
        async with TasksClientSession(
            read, write, elicitation_callback=_elicit, receive_tasks=False
        ) as session:
            await session.initialize()
            yield session


def _print_result(result: Any) -> int:
    for block in result.content:
        text = getattr(block, "text", None)
        print(text if text is not None else block.model_dump_json(by_alias=True))
    return 1 if result.is_error else 0


def _print_json(data: Any) -> None:
    if hasattr(data, "model_dump"):
        data = data.model_dump(mode="json", by_alias=True, exclude_unset=True)
    print(json.dumps(data, indent=2, sort_keys=True))


async def _run(args: argparse.Namespace) -> int:
    import mcp_types as types

    async with _connect(args.target, args.token) as session:
        requestor = session.tasks
        if args.command == "call":
            arguments = _parse_arguments(args.arguments)
            if not args.task:
                return _print_result(await session.call_tool(args.tool, arguments))
            line = _StatusLine()
            try:
                created = await requestor.call_tool_as_task(args.tool, arguments, ttl=args.ttl)
                line.show(created.task)
                task = await requestor.wait(
                    created.task.taskId, on_status=line.show, first=created.task
                )
                raw = await requestor.result(task.taskId)
                line.show(await requestor.get(task.taskId))
            finally:
                line.done()
            return _print_result(types.CallToolResult.model_validate(raw))
        if args.action == "list":
            _print_json({"tasks": [t.model_dump(mode="json") for t in await requestor.list_all()]})
        elif args.action == "get":
            _print_json(await requestor.get(args.task_id))
        elif args.action == "result":
            _print_json(await requestor.result(args.task_id))
        elif args.action == "cancel":
            _print_json(await requestor.cancel(args.task_id))
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mcptask", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--token", help="bearer token (Streamable HTTP)")

    call = sub.add_parser("call", parents=[common], help="call a tool (as a task with --task)")
    call.add_argument("target", help="http(s) URL or a stdio server command")
    call.add_argument("tool")
    call.add_argument("arguments", nargs="*", metavar="key=value")
    call.add_argument("--task", action="store_true", help="call it as a task")
    call.add_argument("--ttl", type=int, default=None, help="requested task ttl (ms)")

    tasks = sub.add_parser("tasks", help="tasks/list|get|result|cancel")
    actions = tasks.add_subparsers(dest="action", required=True)
    lst = actions.add_parser("list", parents=[common])
    lst.add_argument("target")
    for name in ("get", "result", "cancel"):
        p = actions.add_parser(name, parents=[common])
        p.add_argument("target")
        p.add_argument("task_id")
    return parser


def _unwrap(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    from mcp.shared.exceptions import MCPError

    from .runtime.mcp_client import TaskNotSupported

    try:
        code = anyio.run(_run, args)
    except KeyboardInterrupt:
        code = 130
    except Exception as exc:
        err = _unwrap(exc)
        if isinstance(err, MCPError):
            print(f"mcptask: error {err.code}: {err.message}", file=sys.stderr)
            code = 1
        elif isinstance(err, TaskNotSupported):
            print(f"mcptask: {err}", file=sys.stderr)
            code = 2
        else:
            raise
    raise SystemExit(code)


if __name__ == "__main__":
    main()
