"""The example server's flags for the engine's limits, the HTTP sessions and the slow-client
deadlines, and their checks (the server's other flags are in ``server.py``)."""

from __future__ import annotations

import argparse
import math

from mcp.server.streamable_http_manager import DEFAULT_MAX_SESSIONS, DEFAULT_SESSION_IDLE_TIMEOUT

from ..protocol import TASKS_LIST
from ..runtime.mcp_server import DEFAULT_SESSIONS_PER_REQUESTOR

__all__ = ["SLOW_CLIENT_FLAGS", "http_flags", "http_flags_problem", "limit_flags"]

#: (flag, default seconds, help) of the slow-client deadlines (``runtime/slow_clients.py``)
SLOW_CLIENT_FLAGS = (
    ("--header-timeout", 10.0, "a request's head must arrive within S seconds (default 10)"),
    ("--body-timeout", 30.0, "at most S seconds between two reads of a body (default 30)"),
    ("--send-timeout", 30.0, "drop a connection that reads none of its answer for S (default 30)"),
    ("--keep-alive-timeout", 5.0, "close a connection idle between requests after S (default 5)"),
)


def limit_flags(parser: argparse.ArgumentParser) -> None:
    """The engine's limit flags (``EngineConfig`` fields, :func:`engine_config`)."""
    limits = parser.add_argument_group("limits (R-SEC-3, R-SEC-4; defaults: EngineConfig)")
    limits.add_argument(
        "--max-active", type=int, metavar="N", help="non-terminal tasks per requestor"
    )
    limits.add_argument(
        "--rate-limit", metavar="CALLS/SECONDS", help="task requests per requestor per window"
    )
    limits.add_argument("--max-ttl", type=int, metavar="MS", help="maximum ttl (larger is clamped)")
    limits.add_argument("--default-ttl", type=int, metavar="MS", help="ttl when none is asked")
    limits.add_argument("--page-size", type=int, metavar="N", help=f"{TASKS_LIST} page size")
    limits.add_argument(
        "--max-tasks",
        type=int,
        metavar="N",
        help="tasks kept per requestor (oldest finished dropped)",
    )
    limits.add_argument(
        "--max-result-bytes", type=int, metavar="N", help="largest result one task keeps"
    )
    limits.add_argument(
        "--max-result-bytes-per-requestor", type=int, metavar="N", help="result bytes kept"
    )


def http_flags(parser: argparse.ArgumentParser) -> None:
    """Sessions (the SDK's global cap and idle timeout, ours per requestor) and the
    slow-client deadlines (``runtime/slow_clients.py``)."""
    http = parser.add_argument_group("HTTP sessions and slow clients (--http)")
    http.add_argument(
        "--max-sessions", type=int, default=DEFAULT_MAX_SESSIONS, metavar="N",
        help=f"open 2025-11-25 sessions in all (default {DEFAULT_MAX_SESSIONS:,})",
    )  # fmt: skip
    http.add_argument(
        "--max-sessions-per-requestor", type=int, default=DEFAULT_SESSIONS_PER_REQUESTOR,
        metavar="N", help="open sessions per token subject, else per client address"
        f" (default {DEFAULT_SESSIONS_PER_REQUESTOR:,})",
    )  # fmt: skip
    http.add_argument(
        "--session-idle-timeout", type=float, default=DEFAULT_SESSION_IDLE_TIMEOUT, metavar="S",
        help=f"end a session idle this long (default {DEFAULT_SESSION_IDLE_TIMEOUT:g} s)",
    )  # fmt: skip
    for flag, default, what in SLOW_CLIENT_FLAGS:
        http.add_argument(flag, type=float, default=default, metavar="S", help=what)


def http_flags_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the session and slow-client flags (``None``: nothing)."""
    for name, value in (
        ("--max-sessions", args.max_sessions),
        ("--max-sessions-per-requestor", args.max_sessions_per_requestor),
    ):
        if value < 1:
            return f"{name}: N >= 1, not {value}"
    seconds = [("--session-idle-timeout", args.session_idle_timeout)]
    seconds += [(f, getattr(args, f[2:].replace("-", "_"))) for f, _, _ in SLOW_CLIENT_FLAGS]
    for name, value in seconds:
        if not (math.isfinite(value) and value > 0):
            return f"{name}: a positive number of seconds, not {value}"
    return None
