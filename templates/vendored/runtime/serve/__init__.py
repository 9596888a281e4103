"""Serving with the ``mcp`` SDK: ``McpTasks`` (tasks on an ``mcp`` server, over stdio or
Streamable HTTP), ``TaskTools`` (which tools run as tasks), ``bearer_tokens`` (tasks bound to
a token's subject); inside, the router, the two front doors, sessions, identity, streams,
running a tool and the executors."""

from __future__ import annotations

from .identity import bearer_tokens
from .server import (
    McpTasks,
    TaskSupportValue,
    TaskTools,
    check_task_support,
    request_client_task,
    run_stdio,
    tidy_http_errors,
)

__all__ = [
    "McpTasks",
    "TaskSupportValue",
    "TaskTools",
    "bearer_tokens",
    "check_task_support",
    "request_client_task",
    "run_stdio",
    "tidy_http_errors",
]
