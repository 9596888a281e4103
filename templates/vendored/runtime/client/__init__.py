"""Clients: ``connect()`` opens a session on either face and its ``TaskRequestor`` calls a tool
as a task and follows it; inside, the tasks extension's client (``client.extension``, when the
package has that face), retries across a dropped connection, what a requestor reports, and the
transport of the bindings' typed clients."""

from __future__ import annotations

from .requestor import (
    ConnectionLost,
    ProgressCallback,
    ServerUnreachable,
    StatusCallback,
    TaskNotSupported,
    TaskRequestor,
    TasksClientSession,
    connect,
    http_client,
)

__all__ = [
    "ConnectionLost",
    "ProgressCallback",
    "ServerUnreachable",
    "StatusCallback",
    "TaskNotSupported",
    "TaskRequestor",
    "TasksClientSession",
    "connect",
    "http_client",
]
