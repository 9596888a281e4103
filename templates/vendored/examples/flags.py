"""The example server's flags for the engine's limits, the HTTP sessions, the slow-client
deadlines and connection caps, and their checks (the server's other flags are in
``server.py``)."""

from __future__ import annotations

import argparse
import math

from mcp.server.streamable_http_manager import DEFAULT_MAX_SESSIONS, DEFAULT_SESSION_IDLE_TIMEOUT

from ..protocol import TASKS_LIST
from ..runtime.http.slow_clients import (
    DEFAULT_MAX_HEAD_BYTES,
    DEFAULT_MAX_HEADERS,
    DEFAULT_MIN_BODY_RATE,
    DEFAULT_PER_ADDRESS,
    ConnectionCaps,
    default_max_connections,
    descriptor_limit,
    trusted_addresses,
)
from ..runtime.serve.server import DEFAULT_SESSIONS_PER_REQUESTOR

__all__ = [
    "SLOW_CLIENT_FLAGS",
    "connection_caps",
    "http_flags",
    "http_flags_problem",
    "limit_flags",
]

#: (flag, default seconds, help) of the slow-client deadlines (``runtime/slow_clients.py``)
SLOW_CLIENT_FLAGS = (
    ("--header-timeout", 10.0, "a request's head must arrive within S seconds (default 10)"),
    ("--request-timeout", 60.0, "a whole request, head and body, within S seconds (default 60)"),
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
        help="tasks kept per requestor, else per client address (oldest finished dropped)",
    )
    limits.add_argument(
        "--max-result-bytes", type=int, metavar="N", help="largest result one task keeps"
    )
    limits.add_argument(
        "--max-result-bytes-per-requestor", type=int, metavar="N", help="result bytes kept"
    )
    limits.add_argument(
        "--max-tasks-total", type=int, metavar="N", help="tasks kept by all requestors together"
    )
    limits.add_argument(
        "--max-result-bytes-total", type=int, metavar="N", help="result bytes kept in all"
    )
    limits.add_argument(
        "--shutdown-grace", type=float, metavar="S",
        help="on SIGTERM, requests in flight get up to S seconds to end, then running tasks"
        " up to S to finish (default 25; 0: stop them at once)",
    )  # fmt: skip


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
    http.add_argument(
        "--max-head-bytes", type=int, default=DEFAULT_MAX_HEAD_BYTES, metavar="N",
        help="a request's head (request line and headers) in at most N bytes, else HTTP 431"
        f" (default {DEFAULT_MAX_HEAD_BYTES:,})",
    )  # fmt: skip
    http.add_argument(
        "--max-headers", type=int, default=DEFAULT_MAX_HEADERS, metavar="N",
        help=f"at most N header fields in a request, else HTTP 431 (default {DEFAULT_MAX_HEADERS})",
    )  # fmt: skip
    least, window = DEFAULT_MIN_BODY_RATE
    http.add_argument(
        "--min-body-rate", default=f"{least}/{window:g}", metavar="BYTES/SECONDS",
        help=f"a body sends at least BYTES every SECONDS, else closed; 0: no minimum"
        f" (default {least}/{window:g}: 1 KiB/s over {window:g} s windows)",
    )  # fmt: skip
    http.add_argument(
        "--max-connections", type=int, metavar="N",
        help="open connections in all, both ports (default: the descriptor limit"
        " less a reserve of an eighth of it, at least 64)",
    )  # fmt: skip
    http.add_argument(
        "--max-connections-per-address", type=int, metavar="N",
        help=f"open connections of one client address (default {DEFAULT_PER_ADDRESS},"
        " at most half of --max-connections)",
    )  # fmt: skip
    http.add_argument(
        "--forwarded-allow-ips", metavar="IPS",
        help="trust X-Forwarded-For from these proxies (IPs or networks, comma-separated,"
        " or *); default: the client is the socket's peer, the header ignored",
    )  # fmt: skip


def http_flags_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the session, slow-client and connection flags (``None``:
    nothing); reads ``--min-body-rate`` and the connection caps' defaults into ``args``
    (:func:`_body_rate_problem`, :func:`_connections_problem`)."""
    for name, value in (
        ("--max-sessions", args.max_sessions),
        ("--max-sessions-per-requestor", args.max_sessions_per_requestor),
        ("--max-head-bytes", args.max_head_bytes),
        ("--max-headers", args.max_headers),
    ):
        if value < 1:
            return f"{name}: N >= 1, not {value}"
    seconds = [("--session-idle-timeout", args.session_idle_timeout)]
    seconds += [(f, getattr(args, f[2:].replace("-", "_"))) for f, _, _ in SLOW_CLIENT_FLAGS]
    for name, value in seconds:
        if not (math.isfinite(value) and value > 0):
            return f"{name}: a positive number of seconds, not {value}"
    return _body_rate_problem(args) or _connections_problem(args)


def _body_rate_problem(args: argparse.Namespace) -> str | None:
    """``--min-body-rate`` read into ``args.body_rate``: ``(BYTES, SECONDS)``, or ``None``
    for ``0`` (no minimum)."""
    least, sep, window = str(args.min_body_rate).partition("/")
    try:
        rate = (int(least), float(window) if sep else DEFAULT_MIN_BODY_RATE[1])
    except ValueError:
        return "--min-body-rate: expected BYTES/SECONDS, e.g. 10240/10"
    if rate[0] < 0 or not (math.isfinite(rate[1]) and rate[1] > 0):
        return "--min-body-rate: BYTES >= 0 and SECONDS > 0"
    args.body_rate = rate if rate[0] else None
    return None


def _connections_problem(args: argparse.Namespace) -> str | None:
    """The connection caps, their defaults from the descriptor limit read now, into
    ``args.max_connections`` and ``args.max_connections_per_address``; the trusted proxies
    into ``args.trusted_proxies`` (``None``: none, the header ignored)."""
    limit = descriptor_limit()
    if args.max_connections is None:
        args.max_connections = default_max_connections(limit)
    elif not 1 <= args.max_connections < limit:
        return (
            f"--max-connections: 1 <= N < {limit} (the descriptor limit, ulimit -n),"
            f" not {args.max_connections}"
        )
    if args.max_connections_per_address is None:
        args.max_connections_per_address = max(
            1, min(DEFAULT_PER_ADDRESS, args.max_connections // 2)
        )
    elif args.max_connections_per_address < 1:
        return f"--max-connections-per-address: N >= 1, not {args.max_connections_per_address}"
    args.trusted_proxies = None
    if args.forwarded_allow_ips is not None:
        try:
            args.trusted_proxies = trusted_addresses(args.forwarded_allow_ips)
        except ValueError as exc:
            return f"--forwarded-allow-ips: {exc}"
    return None


def connection_caps(args: argparse.Namespace) -> ConnectionCaps:
    """The caps of the flags (checked by :func:`http_flags_problem`), for every listener of
    the process: a trusted proxy's connections count in all only."""
    return ConnectionCaps(
        args.max_connections, args.max_connections_per_address, exempt=args.trusted_proxies
    )
