"""mcptask: try an MCP server's tools and tasks by hand (built on runtime.client).

commands:
  mcptask tools TARGET [--token TOKEN]   the server's tools: name, task support, summary
  mcptask call TARGET TOOL [key=value ...] [--task] [--detach] [--ttl MS] [--token TOKEN]
  mcptask tasks list   TARGET [--token TOKEN]
  mcptask tasks get    TARGET TASK_ID [--token TOKEN]
  mcptask tasks result TARGET TASK_ID [--token TOKEN]
  mcptask tasks cancel TARGET TASK_ID [--token TOKEN]
  (every command above also takes --protocol auto|REVISION|MODERN, default auto,
   and --header 'NAME: VALUE', any number, sent with every HTTP request)
  mcptask admin list|show|cancel ...   every requestor's tasks, for operators
                                       (mcptask admin --help)

TARGET is a Streamable HTTP URL (http://127.0.0.1:8000/mcp) or a command that
serves MCP over stdio ("python -m PACKAGE.examples.server --stdio", PACKAGE
being this package's import name).

key=value: the tool's inputSchema decides. A value for a string property stays a
string (text=42 sends "42"); for integer, number, boolean, object or array
properties it is parsed as JSON (seconds=3, tags='["a"]'). Properties the schema
does not type are parsed as JSON when they are valid JSON, else kept as strings.

call: a tool whose taskSupport is "required" runs as a task without --task.
As a task, a status line and the tool's progress follow it on stderr, polling at
the server's pollInterval; Ctrl-C sends tasks/cancel and exits 130. --detach
prints the task id on stdout and exits at once (HTTP only; the task runs on).
The server's questions (elicitation, a task's input requests) are asked on the
terminal; in a script, --answer key=value (any number) answers every question
with those fields, or stdin gives a JSON object of them (or an array: one per
question, in order); empty stdin declines.

Tasks belong to whoever created them: the bearer token's subject, else the
session. Every mcptask run opens a new session, so tasks get|result|cancel|list
reach the tasks of an earlier run only when both runs pass the same --token;
--detach is refused where the server would bind the task to this run's session
(it would be cancelled when mcptask exits): without --token, or with a --token
that a server not checking tokens (started without --tokens) ignores.

Protocol: auto connects with the initialize handshake and uses its tasks when
the server declares them (tasks list and result exist only there); a server that
does not is asked again with server/discover, and its tasks extension
(io.modelcontextprotocol/tasks) is used: call polls tasks/get at pollIntervalMs
and answers the server's input requests through tasks/update, tasks get|cancel
work, tasks result polls to the end, tasks list is refused (the extension has
none). --protocol pins one revision.

Exit status: 0 done; 1 the tool or the server reported an error; 2 usage, a
TARGET that cannot be reached or started (or without an MCP endpoint), or a call
that cannot be made as asked: a tool the server lacks, --task of a tool that does
not run as a task, arguments the tool refuses (one line saying why); 130
interrupted (the task was cancelled).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import shlex
import shutil
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio

from .cli_common import (
    Answers,
    OneLineParser,
    Progress,
    StatusLine,
    Usage,
    coerce_arguments,
    dump,
    headers_of,
    interruptible,
    print_json,
    print_result,
    quiet_on_closed_stdout,
    suggest,
)
from .cli_tools import check_call, list_tools
from .descriptor import GENERATOR_VERSION
from .protocol import REVISION, TASK_SUPPORT_REQUIRED, TERMINAL
from .runtime.parts import DISTRIBUTION

#: what ``mcptask --version`` prints: the runtime's distribution and version
VERSION_LINE = f"mcptask ({DISTRIBUTION}) {GENERATOR_VERSION}"

__all__ = ["coerce_arguments", "main"]


@dataclass
class _Http:
    """What the HTTP layer saw (a 401 or 403 is reported as such, not as -32603; so is a
    404 before any answer: no MCP endpoint at that URL)."""

    status: int | None = None
    #: the Streamable HTTP session the server made (None: stateless, or not HTTP)
    session_id: str | None = None
    answered: bool = False

    async def on_response(self, response: Any) -> None:
        code = int(response.status_code)
        if code in (401, 403) or (code == 404 and not self.answered):
            self.status = code
        self.answered = self.answered or 200 <= code < 300
        self.session_id = response.headers.get("mcp-session-id") or self.session_id


AUTO = "auto"


@asynccontextmanager
async def _connect(
    target: str,
    headers: dict[str, str] | None,
    http: _Http,
    progress: Progress,
    protocol: str = AUTO,
    answers: Answers | None = None,
) -> AsyncIterator[Any]:
    """A session on ``protocol``; ``auto``: the handshake's tasks when the server declares
    them, else the tasks extension's revision (a second connection), else the handshake."""
    if protocol != AUTO:
        async with _open(target, headers, http, progress, answers, protocol != REVISION) as session:
            yield session
        return
    async with _open(target, headers, http, progress, answers, False) as session:
        caps = session.initialize_result.capabilities
        if caps.tasks is not None:
            yield session
            return
    from mcp.shared.exceptions import MCPError

    entered = False
    try:
        async with _open(target, headers, http, progress, answers, True) as session:
            entered = True
            yield session
        return
    except MCPError:
        if entered:
            raise
    async with _open(
        target, headers, http, progress, answers, False
    ) as session:  # no server/discover
        yield session


@asynccontextmanager
async def _open(
    target: str,
    headers: dict[str, str] | None,
    http: _Http,
    progress: Progress,
    answers: Answers | None,
    modern: bool,
) -> AsyncIterator[Any]:
    from .runtime.client.requestor import TasksClientSession

    options: dict[str, Any] = {
        "elicitation_callback": (answers or Answers()).elicit,
        "message_handler": progress.on_message,
        "receive_tasks": False,
    }
    if target.startswith(("http://", "https://")):
        from mcp.client.streamable_http import streamable_http_client

        from .runtime.client.retry import http_client

        async with http_client(
            headers=headers, event_hooks={"response": [http.on_response]}
        ) as client:
            async with streamable_http_client(target, http_client=client) as (read, write):
                async with TasksClientSession(read, write, **options) as session:
                    await (session.discover() if modern else session.initialize())
                    yield session
        return
    from mcp import StdioServerParameters, stdio_client

    argv = shlex.split(target)
    if not argv:
        raise Usage("empty TARGET")
    if shutil.which(argv[0]) is None:
        raise Usage(
            f"TARGET {target!r}: no command {argv[0]!r} to start (TARGET is an http(s)://"
            " URL, or a command that serves MCP over stdio)"
        )
    params = StdioServerParameters(command=argv[0], args=argv[1:])
    async with stdio_client(params) as (read, write):
        async with TasksClientSession(read, write, **options) as session:
            await (session.discover() if modern else session.initialize())
            yield session


_NO_TOKEN_HINT = (
    "mcptask: note: without --token every mcptask run is a new session, and a server binds\n"
    "tasks to the session (or to the bearer token's subject): pass the same --token to the\n"
    "run that creates a task and to the runs that look at it"
)


async def _run_task(
    args: argparse.Namespace,
    session: Any,
    arguments: dict[str, Any],
    progress: Progress,
    schema: Any = None,
) -> int:
    import mcp_types as types

    requestor = session.tasks
    task_id: str | None = None
    raw: Any = None

    async def body(line: StatusLine) -> None:
        nonlocal task_id, raw
        created = await requestor.call_tool_as_task(
            args.tool, arguments, ttl=args.ttl, progress_token=progress.token
        )
        task_id = created.task.taskId
        if args.detach:
            print(task_id)
            return
        line.show(created.task)
        await requestor.wait(task_id, on_status=line.show, first=created.task)
        raw = await requestor.result(task_id)
        line.show(await requestor.get(task_id))

    if await interruptible(progress, body):
        if task_id is not None:
            with anyio.move_on_after(10, shield=True):
                task = await requestor.get(task_id)
                if task.status not in TERMINAL:
                    task = await requestor.cancel(task_id)  # tasks/cancel
                print(
                    f"mcptask: interrupted; task {task_id} is {task.status.value}", file=sys.stderr
                )
        return 130
    if args.detach:
        return 0
    return print_result(types.CallToolResult.model_validate(raw), args.tool, arguments, schema)


async def _run(args: argparse.Namespace, http: _Http, answers: Answers) -> int:
    progress = Progress()
    headers = headers_of(args.token, args.header)
    async with _connect(args.target, headers, http, progress, args.protocol, answers) as session:
        requestor = session.tasks

        def core() -> Any:  # the 2025-11-25 handshake on a second connection
            return _open(args.target, headers, _Http(), progress, None, False)

        if args.command == "tools":
            return await list_tools(session, core)
        if args.command == "call":
            await check_call(args, requestor, bool(http.session_id), core)
        if requestor.ext is not None:
            from .cli_extension import run_ext

            return await run_ext(args, session, progress)
        if args.command == "call":
            tool = await requestor.tool(args.tool)
            schema = tool.input_schema if tool else None
            arguments = coerce_arguments(args.arguments, schema)
            as_task = args.task or args.detach
            if not as_task and tool is not None:
                as_task = await requestor.task_support(args.tool) == TASK_SUPPORT_REQUIRED
            if as_task:
                return await _run_task(args, session, arguments, progress, schema)
            line = StatusLine()
            progress.line = line
            try:
                result = await session.call_tool(
                    args.tool, arguments, progress_callback=line.report
                )
            finally:
                line.done()
            return print_result(result, args.tool, arguments, schema)
        if args.action == "list":
            tasks = await requestor.list_all()
            print_json({"tasks": [dump(t) for t in tasks]})
            if not tasks and not args.token:
                print(_NO_TOKEN_HINT, file=sys.stderr)
        elif args.action == "get":
            print_json(await requestor.get(args.task_id))
        elif args.action == "result":
            print_json(await requestor.result(args.task_id))
        elif args.action == "cancel":
            print_json(await requestor.cancel(args.task_id))
    return 0


def _common_options() -> OneLineParser:
    """The options every command but ``admin`` takes: how to reach the server and which
    revision to speak."""
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    common = OneLineParser(add_help=False)
    common.add_argument(
        "--token", help="bearer token (Streamable HTTP); tasks are bound to its subject"
    )
    common.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="an HTTP header for every request (repeat it), such as a gateway's API key",
    )
    common.add_argument(
        "--protocol",
        default=AUTO,
        choices=[AUTO, REVISION, *MODERN_PROTOCOL_VERSIONS],
        help="protocol revision (default auto: the handshake's tasks, else the extension's)",
    )
    return common


def _parser() -> argparse.ArgumentParser:
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    assert __doc__ is not None
    doc = (
        __doc__.replace("PACKAGE.", f"{__package__}.")
        .replace(", PACKAGE\nbeing this package's import name", "")
        .replace("REVISION|MODERN", "|".join([REVISION, *MODERN_PROTOCOL_VERSIONS]))
    )
    parser = OneLineParser(
        prog="mcptask",
        description="\n\n".join(doc.split("\n\n")[:2]),
        epilog="\n\n".join(doc.split("\n\n")[2:]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=VERSION_LINE)
    sub = parser.add_subparsers(dest="command", required=True)
    common = _common_options()

    tools = sub.add_parser(
        "tools",
        parents=[common],
        help="list the server's tools (name, task support, first line of the description)",
        description="List the server's tools: each one's name, whether it runs as a task "
        "(no, optional, required) and the first line of its description.",
    )
    tools.add_argument("target", help="http(s) URL or a stdio server command")

    call = sub.add_parser(
        "call",
        parents=[common],
        help="call a tool (as a task with --task, or when the tool requires it)",
        description="Call a tool. key=value arguments are typed by the tool's inputSchema.",
    )
    call.add_argument("target", help="http(s) URL or a stdio server command")
    call.add_argument("tool")
    call.add_argument("arguments", nargs="*", metavar="key=value")
    call.add_argument("--task", action="store_true", help="call it as a task")
    call.add_argument(
        "--detach",
        action="store_true",
        help="call it as a task, print the task id and exit (HTTP only; use --token)",
    )
    call.add_argument("--ttl", type=int, default=None, metavar="MS", help="requested task ttl (ms)")
    call.add_argument(
        "--answer",
        action="append",
        default=[],
        metavar="key=value",
        help="answer the server's questions with this field (repeat it; else JSON on stdin)",
    )

    tasks = sub.add_parser(
        "tasks",
        help="tasks/list|get|result|cancel",
        description="tasks/list, tasks/get, tasks/result, tasks/cancel. A task of an earlier "
        "run is found only when both runs pass the same --token.",
    )
    actions = tasks.add_subparsers(dest="action", required=True)
    lst = actions.add_parser("list", parents=[common], help="your tasks (all pages)")
    lst.add_argument("target", help="http(s) URL or a stdio server command")
    for name, text in (
        ("get", "the task's status"),
        ("result", "wait for the task's result"),
        ("cancel", "cancel the task"),
    ):
        p = actions.add_parser(name, parents=[common], help=text)
        p.add_argument("target", help="http(s) URL or a stdio server command")
        p.add_argument("task_id", help="a taskId (from call --detach or tasks list)")
    return parser


class _ClosedStreamNoise(logging.Filter):
    """Drops the SDK transport's log of a stream this run closed on purpose (the session
    ends while a response stream still delivers, after ``--detach`` or Ctrl-C), and of the
    session's end a restarted server no longer knows (its ``DELETE`` answered 404: the
    line this run prints says what happened)."""

    def filter(self, record: logging.LogRecord) -> bool:
        from .runtime.client.retry import leaves

        if record.getMessage() == "Session termination failed: 404":
            return False
        exc = record.exc_info[1] if record.exc_info else None
        return not any(
            isinstance(leaf, (anyio.BrokenResourceError, anyio.ClosedResourceError))
            for leaf in (leaves(exc) if exc is not None else ())
        )


_VALUE_OPTIONS = frozenset({"--token", "--header", "--ttl", "--protocol", "--answer"})
_FLAGS = frozenset({"--task", "--detach", "-h", "--help"})


def _dash_safe(argv: list[str]) -> list[str]:
    """Task IDs may start with ``-`` (URL-safe base64): move every argument that is not one of
    our options behind ``--`` so argparse takes it as a positional."""
    if not argv or "--" in argv:
        return argv
    n = 2 if argv[0] == "tasks" else 1 if argv[0] == "call" else 0
    if not n:
        return argv
    head, rest = argv[:n], argv[n:]
    options: list[str] = []
    positionals: list[str] = []
    i = 0
    while i < len(rest):
        arg = rest[i]
        if arg in _VALUE_OPTIONS and i + 1 < len(rest):
            options += rest[i : i + 2]
            i += 2
            continue
        if arg in _FLAGS or arg.partition("=")[0] in _VALUE_OPTIONS:
            options.append(arg)
        else:
            positionals.append(arg)
        i += 1
    if not any(p.startswith("-") for p in positionals):
        return argv
    return [*head, *options, "--", *positionals]


def _dash_safe_admin(argv: list[str]) -> list[str]:
    """``admin show|cancel ... TASK_ID``: a task ID that starts with ``-`` (URL-safe base64)
    goes behind ``--`` so argparse takes it as the positional."""
    if not argv or argv[0] not in ("show", "cancel") or "--" in argv:
        return argv
    values, flags = {"--store", "--url", "--token-file"}, {"--json", "-h", "--help"}
    rest, moved, i = argv[1:], [], 0
    while i < len(rest):
        arg = rest[i]
        if arg in values:
            i += 2
            continue
        if arg.startswith("-") and arg not in flags and arg.partition("=")[0] not in values:
            moved.append(arg)
        i += 1
    if not moved:
        return argv
    return [argv[0], *(a for a in rest if a not in moved), "--", *moved]


def _one_line(args: argparse.Namespace, http: _Http, exc: BaseException) -> tuple[str, int]:
    """What went wrong, in one line, and the exit status; re-raises what is not a known
    failure (a bug deserves its traceback)."""
    import httpx2
    from mcp.shared.exceptions import MCPError

    from .runtime.client.requestor import TaskNotSupported
    from .runtime.client.retry import ConnectionLost, is_connection_failure, leaves

    found = leaves(exc)
    if http.status == 404:
        path = args.target.split("://", 1)[-1].partition("/")[2]
        hint = "" if path.rstrip("/").endswith("mcp") else " (is the path /mcp?)"
        return f"HTTP 404: no MCP endpoint at {args.target}{hint}", 2
    if http.status is not None:
        fix = "check --token" if args.token else "pass --token TOKEN"
        name = "unauthorized" if http.status == 401 else "access denied"
        return f"{name} (HTTP {http.status}): {fix}", 1
    for leaf in found:
        if isinstance(leaf, (Usage, TaskNotSupported)):
            return str(leaf), 2
    for leaf in found:
        if isinstance(leaf, ConnectionLost):
            again = suggest(args, "tasks", "get", args.target, leaf.task_id) if leaf.task_id else ""
            return f"{leaf}" + (f": {again}" if again else ""), 1
        if isinstance(leaf, httpx2.ConnectError) or is_connection_failure(leaf):
            return f"cannot connect to {args.target} ({leaf}): is the server running there?", 2
        if isinstance(leaf, (httpx2.TransportError, anyio.BrokenResourceError)):
            return f"lost the connection to {args.target} ({leaf or type(leaf).__name__})", 1
    for leaf in found:
        if isinstance(leaf, MCPError):
            hint = f"\n{_NO_TOKEN_HINT}" if args.command == "tasks" and not args.token else ""
            return f"error {leaf.code}: {leaf.message}{hint}", 1
    raise exc


def _complete(parser: argparse.ArgumentParser) -> None:
    """Shell completion, when argcomplete is installed (``pip install argcomplete``, then
    ``eval "$(register-python-argcomplete mcptask)"``): a completion request is answered
    and the run exits; any other run goes on."""
    try:
        argcomplete = importlib.import_module("argcomplete")
    except ImportError:
        return
    argcomplete.autocomplete(parser)


@quiet_on_closed_stdout  # mcptask ... | head: exit 141, no traceback
def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv == ["--version"]:  # before the SDK's check: the version needs no extra
        print(VERSION_LINE)
        raise SystemExit(0)
    if argv[:1] == ["admin"]:
        from .cli_admin import main as admin_main

        raise SystemExit(admin_main(_dash_safe_admin(argv[1:])))
    try:
        from .runtime.sdk import check  # noqa: F401  (one line naming the extra to install)
    except ModuleNotFoundError as exc:
        print(f"mcptask: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    parser = _parser()
    _complete(parser)
    args = parser.parse_args(_dash_safe(argv))
    try:
        answers = Answers(list(getattr(args, "answer", [])))
    except Usage as exc:
        print(f"mcptask: --answer: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    try:
        headers_of(args.token, args.header)
    except Usage as exc:
        print(f"mcptask: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    if (
        args.command == "call"
        and args.detach
        and not args.target.startswith(("http://", "https://"))
    ):
        print(
            "mcptask: --detach needs an HTTP TARGET: a stdio server ends with this run",
            file=sys.stderr,
        )
        raise SystemExit(2)
    logging.getLogger("mcp.client.streamable_http").addFilter(_ClosedStreamNoise())
    http = _Http()
    try:
        code = anyio.run(_run, args, http, answers)
    except KeyboardInterrupt:
        code = 130
    except Exception as exc:
        message, code = _one_line(args, http, exc)
        print(f"mcptask: {message}", file=sys.stderr)
    if answers.error is not None:
        print(f"mcptask: {answers.error}", file=sys.stderr)
        code = 2
    raise SystemExit(code)


if __name__ == "__main__":
    main()
