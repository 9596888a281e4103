"""Example MCP server with tasks, on the ``mcp`` SDK's ``MCPServer``.

    python -m PACKAGE.examples.server --http 127.0.0.1:8000 [--store memory|sqlite:PATH|redis://HOST:PORT/DB]
                                        [--tokens FILE] [--stateless] [--http-stack auto|h11]
                                        [--no-task-endpoint]
                                        [--workers N] [--on-workers [--worker-retries N]]
                                        [LIMITS] [OPS]
    python -m PACKAGE.examples.server --stdio [--store ...] [LIMITS] [OPS]

PACKAGE is the generated package's import name (``mcp_tasks`` for the one shipped).

LIMITS (R-SEC-3, R-SEC-4; defaults from ``EngineConfig``): ``--max-active N``,
``--rate-limit CALLS/SECONDS``, ``--max-ttl MS``, ``--default-ttl MS``, ``--page-size N``,
``--max-tasks N`` (tasks kept per requestor; without a token, per client address),
``--max-result-bytes N`` (one result), ``--max-result-bytes-per-requestor N``,
``--max-tasks-total N`` and ``--max-result-bytes-total N`` (kept by all requestors
together), ``--shutdown-grace S`` (SIGTERM lets running tasks finish that long). Over HTTP also: ``--max-sessions N`` (the SDK's
global cap), ``--max-sessions-per-requestor N``, ``--session-idle-timeout S``, the slow
client deadlines ``--header-timeout S``, ``--request-timeout S``, ``--min-body-rate
BYTES/SECONDS``, ``--body-timeout S``, ``--send-timeout S``, ``--keep-alive-timeout S``, and
the connection caps ``--max-connections N`` (default from the descriptor limit) and
``--max-connections-per-address N``, a request head's ``--max-head-bytes N`` and
``--max-headers N`` (``runtime/slow_clients.py``; the same on ``--ops``, counted together).
A client's address is its socket's peer: ``X-Forwarded-For`` is ignored unless
``--forwarded-allow-ips IPS`` names the proxies to believe it from.
Over stdio, lines that are not JSON-RPC are answered (-32700/-32600), never dropped.

OPS (``examples/ops.py``; each off unless given): ``--ops HOST:PORT`` serves health there,
``--metrics-token-file FILE`` adds ``/metrics`` and ``--admin-token-file FILE`` the dashboard
``/admin/``, each behind its own token; never on the MCP port.

Tools (a fixed contract other tests rely on):

- ``greet`` {name}: no taskSupport; text ``Hello, {name}!``.
- ``slow_compute`` {seconds=1 (0 to 86,400), label?}: optional; waits, reporting progress;
  text ``done after {seconds}s ({label or 'no label'})``.
- ``failing_job`` {}: required; ``isError`` result ``job failed`` (task ``failed``).
- ``protocol_error_job`` {}: required; raises, the task ends ``failed`` and
  ``tasks/result`` answers the JSON-RPC error.
- ``confirm_delete`` {path} or {filename}: optional; asks by ``elicitation/create``;
  accept -> ``deleted {path}``, otherwise ``kept {path}``.
- ``multi_input`` {}: optional; asks two questions at once (two elicitations outstanding
  together, answers ``{name, confirm}``); text ``answers: {name} {action}, {name} {action}``.
- ``test_tool_with_task`` {}: required; asks the user's name through the SDK resolver
  ``user_name`` (``Resolve``): on 2025-11-25 an ``elicitation/create`` inside the task; on
  2026-07-28 an input round (``input_required``) the client answers by retrying with
  ``inputResponses``; text ``Hello, {name}!``.

``multi_input`` and ``test_tool_with_task`` are fixture tools of the official conformance
suite's ``tasks-*`` scenarios; every tool has a description (its ``tools-list`` check).

``--store redis://HOST:PORT/DB[?namespace=NS&lease=SECONDS]``: tasks shared by every
instance using the same Redis and namespace (needs the ``redis`` extra); run several
instances behind a load balancer, with ``--tokens`` so one requestor is one subject.
The store is ``runtime.store_from_url``'s; the server reads it once before it serves and
exits 2 with one line when it cannot (``--no-store-check`` starts anyway: task calls then
answer "Task store unavailable" until the store answers).

A mistake in the flags (an unknown store, a ``--http`` that is not HOST:PORT, a ``--tokens``
file that is missing or not a JSON map of strings, a SQLite file in a missing directory)
exits 2 with one line naming it.

``--http-stack auto|h11``: ``auto`` (the default) serves HTTP with uvicorn's ``httptools``
parser on the ``uvloop`` event loop when both are installed (the ``mcp`` extra installs
them; each falls back to the pure-Python one when missing); ``h11`` with uvicorn's ``h11``
parser on plain ``asyncio``. uvloop is anyio's event loop here (``anyio.run``'s
``use_uvloop``): uvicorn serves on the loop it is given.

``--workers N`` (HTTP): N processes serve the one port (``examples/workers.py``); the
kernel picks the worker of each connection, so every worker must be able to answer every
request: more than one needs ``--stateless`` (a session lives in one process), ``--tokens``
(one requestor on every worker) and a ``redis://`` store (the shared tasks, wake-ups and
leases); otherwise the server refuses to start, saying what is missing.

``--on-workers`` (needs a ``redis://`` store): every task tool's work runs on worker
processes, started apart with ``python -m PACKAGE.worker --store redis://...
PACKAGE.examples.server:worker_app``; this process accepts calls and answers ``tasks/*``.
``--worker-retries N``: ``slow_compute`` runs again (up to N more times) when its worker
dies; the other tools are not retried (their task fails). Not ``--workers N``, which is
N HTTP-serving processes on one port.

``--tokens FILE``: a JSON object mapping bearer token -> subject; tasks are then
bound to the subject (R-SEC-1), which survives sessions and restarts.
Without tokens, tasks are bound to the transport session (R-SEC-2) and cancelled
when it ends (stdio EOF, HTTP session DELETE): nobody could reach them afterwards.
"""

from __future__ import annotations

# isort: off
from ..runtime.sdk import check as sdk_check  # first: a missing mcp SDK is one line

# isort: on

import argparse
import gc
import importlib.util
import json
import logging
import math
import signal
import socket
import sys
from typing import Annotated, Any

import anyio
import mcp_types as types
from mcp.server.elicitation import AcceptedElicitation, ElicitationResult
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, Field

from ..cli_common import OneLineParser
from ..errors import StoreUnavailable
from ..protocol import TASK_SUPPORT_OPTIONAL, TASK_SUPPORT_REQUIRED
from ..runtime.engine.task_engine import EngineConfig
from ..runtime.http.coalesced_writes import coalesced_writes
from ..runtime.http.slow_clients import guarded_protocol
from ..runtime.serve.identity import bearer_tokens
from ..runtime.serve.server import McpTasks, run_stdio, tidy_http_errors
from ..runtime.stores.url import check_store, shared_store_url, store_from_url
from ..store import TaskStore
from .flags import connection_caps, http_flags, http_flags_problem, limit_flags
from .ops import add_ops_flags, check_ops_flags, ops_served

__all__ = ["build_server", "load_tokens", "main", "worker_app"]

PROG = f"python -m {__package__}.server"

#: ``--http-stack``: ``auto`` = httptools + uvloop when installed, ``h11`` = h11 + asyncio
HTTP_STACKS = ("auto", "h11")


class Confirm(BaseModel):
    confirm: bool = Field(default=True, description="Really delete?")


class NamedConfirm(BaseModel):
    name: str = Field(default="", description="Your name")
    confirm: bool = Field(default=True, description="Go ahead?")


class UserName(BaseModel):
    name: str = Field(description="Your name")


def user_name() -> Elicit[UserName]:
    """Resolver of ``test_tool_with_task``: ask the client for the user's name."""
    return Elicit("Your name?", UserName)


def build_server(
    *,
    store: TaskStore | None = None,
    tokens: dict[str, str] | None = None,
    config: EngineConfig | None = None,
    on_workers: bool = False,
    worker_retries: int = 0,
) -> tuple[MCPServer, McpTasks]:
    """The example ``MCPServer`` and its task adapter. ``on_workers``: every task tool's
    work runs on worker processes (``python -m PACKAGE.worker``); ``slow_compute`` (which
    may run twice harmlessly) runs again up to ``worker_retries`` times when its worker
    dies, the others are not retried."""
    auth = bearer_tokens(tokens) if tokens is not None else {}
    mcp = MCPServer("mcp-tasks-example", **auth)
    tasks = McpTasks(mcp, store=store, config=config)
    remote: dict[str, Any] = {"on_workers": on_workers}

    @mcp.tool()
    async def greet(name: str) -> str:
        """Say hello (never a task)."""
        return f"Hello, {name}!"

    @tasks.tool(
        task_support=TASK_SUPPORT_OPTIONAL,
        on_workers=on_workers,
        retries=worker_retries if on_workers else 0,
    )
    @mcp.tool()
    async def slow_compute(
        ctx: Context,
        seconds: Annotated[float, Field(allow_inf_nan=False, ge=0, le=86_400)] = 1,
        label: str | None = None,
    ) -> str:
        """Wait `seconds`, reporting progress; stops early when cancelled."""
        steps = max(1, int(min(seconds, 2.0) * 10))  # never int() of a huge product
        if seconds > 0:
            start = anyio.current_time()
            for i in range(steps):
                # Deadlines, not sleeps: the steps' timer overshoots must not add up.
                await anyio.sleep_until(start + seconds * (i + 1) / steps)
                await ctx.report_progress(i + 1, steps, f"step {i + 1}/{steps}")
        return f"done after {seconds:g}s ({label or 'no label'})"

    @tasks.tool(task_support=TASK_SUPPORT_REQUIRED, **remote)
    @mcp.tool()
    async def failing_job() -> types.CallToolResult:
        """Always ends with an isError result (task status failed)."""
        return types.CallToolResult(
            content=[types.TextContent(type="text", text="job failed")], is_error=True
        )

    @tasks.tool(task_support=TASK_SUPPORT_REQUIRED, **remote)
    @mcp.tool()
    async def protocol_error_job() -> str:
        """Always raises: the task fails with a JSON-RPC error."""
        raise MCPError(types.INTERNAL_ERROR, "Internal error: protocol_error_job crashed")

    add_input_tools(mcp, tasks, on_workers=on_workers)
    return mcp, tasks


def add_input_tools(mcp: MCPServer, tasks: McpTasks, *, on_workers: bool = False) -> None:
    """The tools that ask the client for input (elicitation) while they run."""
    remote: dict[str, Any] = {"on_workers": on_workers}

    @tasks.tool(task_support=TASK_SUPPORT_OPTIONAL, **remote)
    @mcp.tool()
    async def confirm_delete(
        ctx: Context, path: str | None = None, filename: str | None = None
    ) -> str:
        """Ask the user before deleting `path` (or `filename`; nothing is really deleted)."""
        target = path if path is not None else filename
        if target is None:
            raise ValueError("confirm_delete needs `path` or `filename`")
        answer = await ctx.elicit(f"Delete {target}?", schema=Confirm)
        yes = isinstance(answer, AcceptedElicitation) and answer.data.confirm
        return f"deleted {target}" if yes else f"kept {target}"

    @tasks.tool(task_support=TASK_SUPPORT_OPTIONAL, **remote)
    @mcp.tool()
    async def multi_input(ctx: Context) -> str:
        """Ask two questions at once (two elicitations outstanding together)."""
        answers: dict[str, str] = {}

        async def ask(question: str) -> None:
            got = await ctx.elicit(question, schema=NamedConfirm)
            name = got.data.name if isinstance(got, AcceptedElicitation) else ""
            answers[question] = f"{name} {got.action}".strip()

        questions = ("First: your name, and go ahead?", "Second: your name, and go ahead?")
        async with anyio.create_task_group() as tg:
            for question in questions:
                tg.start_soon(ask, question)
        return "answers: " + ", ".join(answers[q] for q in questions)

    @tasks.tool(task_support=TASK_SUPPORT_REQUIRED, gather_first=True, **remote)
    @mcp.tool()
    async def test_tool_with_task(
        who: Annotated[ElicitationResult[UserName], Resolve(user_name)],
    ) -> str:
        """Ask the user's name, then greet them (always a task)."""
        name = who.data.name if isinstance(who, AcceptedElicitation) else "stranger"
        return f"Hello, {name}!"


#: the example's on/off flags (``store_true``), in the order ``--help`` lists them
SWITCHES: tuple[tuple[str, str], ...] = (
    ("--no-store-check", "start though the store does not answer (task calls fail till it does)"),
    ("--stateless", "Streamable HTTP without sessions"),
    ("--no-task-endpoint", "serve the task methods through the SDK's per-request machinery too"),
    ("--on-workers", "task tools run on worker processes (python -m PACKAGE.worker; redis://)"),
)

#: the example's counts (``N``): flag, default, help
COUNTS: tuple[tuple[str, int, str], ...] = (
    ("--workers", 1, "N processes on one port (N > 1: --stateless, --tokens, a redis:// store)"),
    ("--worker-retries", 0, "with --on-workers: rerun slow_compute up to N times on worker death"),
)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = OneLineParser(prog=PROG, description="Example MCP server with MCP tasks.")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument(
        "--http", metavar="HOST:PORT", type=host_port, help="serve Streamable HTTP at /mcp"
    )
    mode.add_argument("--stdio", action="store_true", help="serve over stdin/stdout")
    parser.add_argument(
        "--store",
        default="memory",
        help="memory (default), sqlite:PATH or redis://HOST:PORT/DB (shared by instances)",
    )
    parser.add_argument("--tokens", metavar="FILE", help="JSON map of bearer token -> subject")
    for flag, about in SWITCHES:
        parser.add_argument(flag, action="store_true", help=about)
    parser.add_argument(
        "--http-stack",
        choices=HTTP_STACKS,
        default="auto",
        help="auto (default): httptools + uvloop when installed; h11: h11 + plain asyncio",
    )
    parser.add_argument("--worker-fd", type=int, help=argparse.SUPPRESS)  # set by --workers
    for flag, default, about in COUNTS:
        parser.add_argument(flag, type=int, default=default, metavar="N", help=about)
    limit_flags(parser)
    http_flags(parser)
    add_ops_flags(parser)
    args = parser.parse_args(argv)
    try:
        args.engine_config = engine_config(args)
    except ValueError as exc:
        parser.error(str(exc))
    problem = http_flags_problem(args)
    if problem is not None:
        parser.error(problem)
    http_only = args.tokens or args.stateless or args.no_task_endpoint or args.http_stack != "auto"
    if args.stdio and http_only:
        parser.error(
            "--tokens, --stateless, --http-stack and --no-task-endpoint apply to --http only"
        )
    problem = workers_problem(args) or on_workers_problem(args)
    if problem is not None:
        parser.error(problem)
    try:
        args.token_map = load_tokens(args.tokens) if args.tokens else None
    except ValueError as exc:
        parser.error(str(exc))
    problem = check_ops_flags(args, args.token_map if args.ops else None)
    if problem is not None:
        parser.error(problem)
    if args.ops:
        sdk_check.require_extra(parser.prog, "ops", "--ops")
    if args.on_workers:
        sdk_check.require_extra(parser.prog, "workers", "--on-workers")
    return args


def on_workers_problem(args: argparse.Namespace) -> str | None:
    """Why ``--on-workers`` cannot serve as asked (``None``: it can)."""
    if args.worker_retries < 0:
        return "--worker-retries: N >= 0"
    if args.worker_retries and not args.on_workers:
        return "--worker-retries applies with --on-workers only"
    if args.on_workers and not shared_store_url(str(args.store)):
        return "--on-workers needs --store redis://HOST:PORT/DB (the workers share it)"
    return None


def worker_app() -> McpTasks:
    """The app of ``python -m PACKAGE.worker ... PACKAGE.examples.server:worker_app``: the
    example's tools (a worker runs whichever tool a job names)."""
    return build_server(on_workers=True)[1]


def host_port(text: str) -> str:
    """``--http HOST:PORT`` (``[::1]:8000`` for IPv6, ``:8000`` for 127.0.0.1), checked."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise argparse.ArgumentTypeError(
            f"expected HOST:PORT with a port up to 65535, e.g. 127.0.0.1:8000, not {text!r}"
        )
    return text


def load_tokens(path: str) -> dict[str, str]:
    """``--tokens FILE``: a JSON object of bearer token -> subject (``ValueError``: why not)."""
    try:
        with open(path, encoding="utf-8") as fh:
            loaded = json.load(fh)
    except OSError as exc:
        raise ValueError(f"--tokens {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ValueError(f"--tokens {path}: not JSON ({exc})") from None
    if not isinstance(loaded, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in loaded.items()
    ):
        raise ValueError(
            f'--tokens {path}: expected a JSON object of token -> subject strings, e.g. {{"s3cret": "alice"}}'
        )
    return loaded


class StartError(Exception):
    """The server cannot start as asked: one line, exit 2."""


def workers_problem(args: argparse.Namespace) -> str | None:
    """Why ``--workers N`` cannot serve as asked (``None``: it can). Any worker may get any
    connection, so each must answer any request: no sessions (they live in one process's
    memory), requestors named by bearer tokens, and the tasks in the shared store."""
    if args.workers < 1:
        return "--workers: N >= 1"
    if args.workers == 1:
        return None
    if not args.http:
        return "--workers applies to --http only"
    missing = []
    if not args.stateless:
        missing.append("--stateless (a session lives in one worker's memory)")
    if not args.tokens:
        missing.append("--tokens FILE (one requestor on every worker)")
    if not shared_store_url(str(args.store)):
        missing.append("--store redis://HOST:PORT/DB (memory and SQLite stores are per process)")
    if missing:
        return f"--workers {args.workers} needs " + ", ".join(missing)
    return None


#: the limit flags (their ``argparse`` dest) that set an ``EngineConfig`` field as given
LIMIT_FIELDS: tuple[tuple[str, str], ...] = (
    ("max_active", "max_active_per_requestor"),
    ("max_ttl", "max_ttl_ms"),
    ("default_ttl", "default_ttl_ms"),
    ("page_size", "page_size"),
    ("max_tasks", "max_tasks_per_requestor"),
    ("max_result_bytes", "max_result_bytes"),
    ("max_result_bytes_per_requestor", "max_result_bytes_per_requestor"),
    ("max_tasks_total", "max_tasks_total"),
    ("max_result_bytes_total", "max_result_bytes_total"),
    ("shutdown_grace", "shutdown_grace_s"),
)


def engine_config(args: argparse.Namespace) -> EngineConfig | None:
    """The ``EngineConfig`` of the limit flags (``None`` when none is given: the defaults)."""
    fields: dict[str, Any] = {}
    if args.rate_limit is not None:
        calls, sep, window = str(args.rate_limit).partition("/")
        try:
            fields["rate_limit_calls"] = int(calls)
            fields["rate_limit_window_s"] = float(window) if sep else 10.0
        except ValueError:
            raise ValueError("--rate-limit: expected CALLS/SECONDS, e.g. 1000/10") from None
        if fields["rate_limit_calls"] < 1 or not fields["rate_limit_window_s"] > 0:
            raise ValueError("--rate-limit: CALLS >= 1 and SECONDS > 0")
    given = {field: getattr(args, dest) for dest, field in LIMIT_FIELDS}
    fields.update({field: value for field, value in given.items() if value is not None})
    if not fields:
        return None
    try:
        return EngineConfig(**fields)
    except ValueError as exc:
        raise ValueError(f"limits: {exc}") from None


async def open_store(args: argparse.Namespace) -> TaskStore:
    """``--store``, read once unless ``--no-store-check`` (:class:`StartError`: why not)."""
    try:
        store = store_from_url(args.store)
    except ValueError as exc:
        raise StartError(f"--store {exc}") from None
    if args.no_store_check:
        return store
    try:
        await check_store(store)
    except StoreUnavailable as exc:
        with anyio.CancelScope(shield=True):
            await store.close()
        raise StartError(
            f"--store {args.store}: the store does not answer ({exc.message}): start it,"
            " or pass --no-store-check to serve anyway"
        ) from None
    return store


async def _serve(args: argparse.Namespace) -> None:
    store = await open_store(args)
    mcp, tasks = build_server(
        store=store,
        tokens=args.token_map,
        config=args.engine_config,
        on_workers=args.on_workers,
        worker_retries=args.worker_retries,
    )
    # Everything made so far (imports, the SDK's and pydantic's tables, the server) lives as
    # long as the process: out of the collector's way, so full collections stay short.
    gc.collect()
    gc.freeze()
    try:
        protocol = http_protocol(args)  # one class, one connection count, for both ports
        async with tasks, ops_served(args, tasks, protocol):
            if args.worker_fd is None:  # a --workers child: its parent says it
                print(started_line(args, store), file=sys.stderr, flush=True)
            if args.stdio:
                await run_stdio(mcp)  # answers malformed lines (-32700/-32600)
                return
            import uvicorn

            host, _, port = str(args.http).rpartition(":")
            app = tidy_http_errors(
                tasks.streamable_http_app(
                    stateless_http=bool(args.stateless),
                    task_endpoint=not args.no_task_endpoint,
                    max_sessions=args.max_sessions,
                    max_sessions_per_requestor=args.max_sessions_per_requestor,
                    session_idle_timeout=args.session_idle_timeout,
                )
            )
            config = uvicorn.Config(
                app,
                host=host or "127.0.0.1",
                port=int(port),
                log_level="warning",
                http=protocol,
                ws="none",  # an upgraded connection would leave the guarded protocol
                # SIGTERM: requests in flight (a held tasks/result, a listen stream) get the
                # grace, then the tasks still running get it again (the app's shutdown)
                timeout_graceful_shutdown=math.ceil(shutdown_grace(args)),
                timeout_keep_alive=args.keep_alive_timeout,
                # the client's address is the socket's unless a trusted proxy says otherwise
                proxy_headers=args.forwarded_allow_ips is not None,
                forwarded_allow_ips=args.forwarded_allow_ips,
            )
            await uvicorn.Server(config).serve(sockets=_inherited(args))
    finally:
        with anyio.CancelScope(shield=True):
            await store.close()


def started_line(args: argparse.Namespace, store: TaskStore | None, workers: int = 1) -> str:
    """The one line the server prints on stderr as it starts: where, the store, the owners."""
    where = f"http://{args.http}/mcp" if args.http else "stdio"
    if store is None:  # the store's URL, without a password
        kind = str(args.store).split("://", 1)[-1].split("@")[-1]
    else:
        kind = getattr(store, "where", None) or type(store).__name__
    owners = "bearer tokens (--tokens)" if args.token_map is not None else "sessions (no --tokens)"
    many = f" ({workers} processes)" if workers > 1 else ""
    return f"{PROG}: serving MCP tasks on {where}{many}; store: {kind}; tasks owned by {owners}"


def shutdown_grace(args: argparse.Namespace) -> float:
    """``--shutdown-grace``, else the engine's default."""
    return (args.engine_config or EngineConfig()).shutdown_grace_s


def http_protocol(args: argparse.Namespace) -> type[Any]:
    """uvicorn's HTTP protocol of ``--http-stack`` (auto: httptools when installed) with the
    slow-client deadlines and the connection caps of the flags (a new count each call: give
    every listener of the process the same class)."""
    base: type[Any]
    if args.http_stack == "h11":
        from uvicorn.protocols.http.h11_impl import H11Protocol

        base = H11Protocol
    else:
        from uvicorn.protocols.http.auto import AutoHTTPProtocol

        base = AutoHTTPProtocol
    return guarded_protocol(
        coalesced_writes(base),
        header_timeout=args.header_timeout,
        body_timeout=args.body_timeout,
        send_timeout=args.send_timeout,
        request_timeout=args.request_timeout,
        min_body_rate=args.body_rate,
        caps=connection_caps(args),
        max_head_bytes=args.max_head_bytes, max_headers=args.max_headers,
    )  # fmt: skip


def backend_options(args: argparse.Namespace) -> dict[str, Any]:
    """anyio's options: the uvloop event loop over HTTP with ``--http-stack auto`` when it
    is installed (uvicorn serves on the running loop; its own ``loop`` setting is unused)."""
    if args.http and args.http_stack == "auto" and importlib.util.find_spec("uvloop"):
        return {"use_uvloop": True}
    return {}


def _inherited(args: argparse.Namespace) -> list[socket.socket] | None:
    """The listening socket a ``--workers`` parent handed this worker (else ``None``)."""
    if args.worker_fd is None:
        return None
    return [socket.socket(fileno=args.worker_fd)]


def _run_workers(args: argparse.Namespace, argv: list[str]) -> None:
    """``--workers N`` (N > 1): the parent of N servers on one port; exits when they stop."""
    from .workers import GRACE_S, serve_workers

    host, _, port = str(args.http).rpartition(":")
    module = f"{__package__}.server"
    host = host.strip("[]") or "127.0.0.1"  # [::1]:8000 names an IPv6 host
    grace = 2 * shutdown_grace(args) + GRACE_S  # each child stops as above first
    print(started_line(args, None, args.workers), file=sys.stderr, flush=True)
    sys.exit(serve_workers(module, argv, host, int(port), args.workers, grace_s=grace))


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = _parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    if args.workers > 1 and args.worker_fd is None:
        _run_workers(args, argv)
    if args.worker_fd is not None:
        # The parent stops a worker with SIGTERM: stop as on Ctrl-C (engine and store close).
        signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        anyio.run(_serve, args, backend_options=backend_options(args))
    except KeyboardInterrupt:
        pass
    except StartError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
