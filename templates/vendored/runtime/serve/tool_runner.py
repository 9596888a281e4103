"""The one way a task's tool runs: through the SDK's whole request pipeline, once.

Every front door (the task endpoint, the SDK's own pipeline through :mod:`.sdk_door`) and
every worker process (:mod:`.worker`) runs the tool of a task-augmented ``tools/call`` with
:func:`tool_runner`: the server's middleware (its span only while tracing records), the
SDK's validation of the call, the tool, its result checks, for a connection and with the
task's own task-scoped outbound as the request-scoped channel. The front door's own
middleware (:mod:`.sdk_door`) is left out of it: the call already is a task. While it runs,
:data:`IN_TASK` is set, for a middleware of the server's own to tell a task's run.
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from typing import Any

from ... import protocol
from ..sdk import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    Connection,
    connection_from_envelope,
    sdk_request_runner,
)
from .router import RunTool

__all__ = ["IN_TASK", "envelope_connection", "tool_runner"]

#: Set while the SDK's pipeline runs a task's own tool (a server's middleware may read it).
IN_TASK: contextvars.ContextVar[bool] = contextvars.ContextVar("mcp_tasks_in_task", default=False)


def tool_runner(server: Any, conn: Connection, lifespan: Any) -> RunTool:
    """``run(task-scoped outbound, tools/call params)``: the tool of a task on ``conn``
    through the SDK's pipeline of ``server`` (``lifespan``: what the server's lifespan
    yielded), its result as the wire dict. Nothing of the SDK is built until the call runs
    as a task: a request that does not become one never builds the SDK's runner."""

    async def run(dctx: Any, params: dict[str, Any]) -> dict[str, Any]:
        on_request = sdk_request_runner(server, conn, lifespan)
        token = IN_TASK.set(True)
        try:
            result: dict[str, Any] = await on_request(dctx, protocol.TOOLS_CALL, params)
            return result
        finally:
            IN_TASK.reset(token)

    return run


def envelope_connection(version: str, params: Mapping[str, Any]) -> Connection:
    """The connection a task's tool runs on for a request of a per-request-envelope revision
    (``version``; a stateless core request has no envelope and gets a bare one): born ready
    from the request's own ``_meta`` envelope (client info, capabilities), as the SDK builds
    one for each such request. Not the SDK's own, which it closes when the request ends: the
    task outlives the request."""
    meta = params.get("_meta")
    envelope: Mapping[str, Any] = meta if isinstance(meta, Mapping) else {}
    return connection_from_envelope(
        version, envelope.get(CLIENT_INFO_META_KEY), envelope.get(CLIENT_CAPABILITIES_META_KEY)
    )
