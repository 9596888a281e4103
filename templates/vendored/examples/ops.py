"""The example server's operator surfaces (``runtime.ops.OpsApp``) on a listener of their own:

    --ops HOST:PORT             health (``/healthz``, ``/readyz``) there; nothing else
                                without the token files below. Never on the MCP port.
    --metrics-token-file FILE   ``/metrics`` there, for ``Authorization: Bearer <FILE's text>``
    --admin-token-file FILE     the dashboard ``/admin/`` and its API there, for
                                ``Authorization: Bearer <FILE's text>``

Each token is the first line of its file (at least 16 characters); the two must differ,
and neither may be a requestor's bearer token (``--tokens``): the server refuses to start
otherwise, saying which. ``--workers N`` (N > 1) refuses ``--ops``: the counters are per
process, and one port shared by the workers would hand each scrape to any one of them.

The listener is served with the MCP port's protocol class (``runtime/slow_clients.py``): the
same slow-client deadlines, and its connections counted with the MCP port's against the
same caps (``--max-connections``, ``--max-connections-per-address``).
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio

__all__ = ["add_ops_flags", "check_ops_flags", "ops_served", "read_token"]


def add_ops_flags(parser: argparse.ArgumentParser) -> None:
    ops = parser.add_argument_group("operators (off unless given; never on the MCP port)")
    ops.add_argument(
        "--ops", metavar="HOST:PORT", help="serve health, and what the token files enable, here"
    )
    ops.add_argument(
        "--metrics-token-file", metavar="FILE", help="serve /metrics on --ops for this token"
    )
    ops.add_argument(
        "--admin-token-file",
        metavar="FILE",
        help="serve the dashboard /admin/ and its API on --ops for this token",
    )


def read_token(path: str) -> str:
    """The first line of ``path``, stripped."""
    text = Path(path).read_text(encoding="utf-8")
    return (text.splitlines() or [""])[0].strip()


def check_ops_flags(args: argparse.Namespace, tokens: dict[str, str] | None = None) -> str | None:
    """Why the operator flags cannot serve as given (None: they can). Reads the token files
    into ``args.metrics_token`` and ``args.admin_token``."""
    args.metrics_token = args.admin_token = None
    files = {
        "--metrics-token-file": args.metrics_token_file,
        "--admin-token-file": args.admin_token_file,
    }
    if args.ops is None:
        given = [flag for flag, value in files.items() if value]
        return f"{given[0]} needs --ops HOST:PORT (where to serve it)" if given else None
    if args.workers > 1:
        return "--ops serves one process's counters: not with --workers N > 1"
    host, sep, port = str(args.ops).rpartition(":")
    if not sep or not port.isdigit():
        return "--ops: expected HOST:PORT, e.g. 127.0.0.1:9464"
    read: dict[str, str] = {}
    for flag, path in files.items():
        if not path:
            continue
        try:
            read[flag] = read_token(path)
        except OSError as exc:
            return f"{flag}: cannot read {path}: {exc.strerror}"
        if len(read[flag]) < 16:
            return f"{flag}: the token must be at least 16 characters"
        if tokens is not None and read[flag] in tokens:
            return f"{flag}: that token is a requestor's (--tokens): give operators their own"
    if len(read) == 2 and len(set(read.values())) == 1:
        return "--metrics-token-file and --admin-token-file must hold different tokens"
    args.metrics_token = read.get("--metrics-token-file")
    args.admin_token = read.get("--admin-token-file")
    return None


def _quiet_server(config: Any) -> Any:
    """A uvicorn server that leaves the signals to the MCP server's (it is stopped with it)."""
    import uvicorn

    class Quiet(uvicorn.Server):
        @contextmanager
        def capture_signals(self) -> Any:
            yield

    return Quiet(config)


@asynccontextmanager
async def ops_served(
    args: argparse.Namespace, tasks: Any, http: type[Any] | None = None
) -> AsyncIterator[Any]:
    """The ``OpsApp`` served on ``--ops`` while inside (nothing without ``--ops``), with
    ``http``, the MCP port's guarded protocol class (``server.http_protocol``: its deadlines,
    and its connection count shared), else uvicorn's own."""
    if args.ops is None:
        yield None
        return
    import uvicorn
    from prometheus_client import disable_created_metrics

    from ..runtime.ops import OpsApp

    disable_created_metrics()  # type: ignore[no-untyped-call]  # no *_created series
    app = OpsApp(tasks, metrics_token=args.metrics_token, admin_token=args.admin_token)
    host, _, port = str(args.ops).rpartition(":")
    config = uvicorn.Config(
        app,
        host=host.strip("[]") or "127.0.0.1",
        port=int(port),
        log_level="warning",
        lifespan="off",
        timeout_graceful_shutdown=2,
        http=http if http is not None else "auto",
        ws="none",
        timeout_keep_alive=args.keep_alive_timeout,
        proxy_headers=False,  # nothing here is keyed by the client's address
    )
    server = _quiet_server(config)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve)
            while not server.started:
                if server.should_exit:
                    raise SystemExit(f"--ops: cannot serve on {args.ops}")
                await anyio.sleep(0.02)
            yield app
            app.close()
            server.should_exit = True
    finally:
        app.close()
