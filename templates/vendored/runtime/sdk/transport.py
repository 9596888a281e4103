"""Transport helpers for serving with the ``mcp`` SDK: stdio that answers malformed lines,
and a Streamable HTTP wrapper that answers a bad envelope in one short line."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

import anyio
import mcp_types as types
from pydantic import ValidationError

from ...errors import InvalidRequest
from ..http.slow_clients import ThrottledLog
from . import SessionMessage, is_sdk_validation_report, lowlevel_server

__all__ = ["malformed_answer", "run_stdio", "tidy_http_errors"]

log = logging.getLogger(__name__)

_INVALID_REQUEST = InvalidRequest(
    detail="not a JSON-RPC 2.0 request, notification or response"
).to_error()


def malformed_answer(exc: Exception) -> types.JSONRPCError:
    """The JSON-RPC 2.0 answer to a line the transport could not read as a message:
    ``-32700`` for bad JSON, else ``-32600`` (id echoed when one can be read). Short
    messages only: the validator's report stays in the server."""
    errors: list[Any] = []
    if isinstance(exc, ValidationError):
        errors = list(exc.errors(include_url=False))
    if not errors or any(e.get("type") == "json_invalid" for e in errors):
        return types.JSONRPCError(
            jsonrpc="2.0",
            id=None,
            error=types.ErrorData(code=types.PARSE_ERROR, message="Parse error: not valid JSON"),
        )
    request_id: str | int | None = None
    for e in errors:
        value = e.get("input")
        if isinstance(value, Mapping):
            rid = value.get("id")
            if isinstance(rid, (str, int)) and not isinstance(rid, bool):
                request_id = rid
                break
    return types.JSONRPCError(
        jsonrpc="2.0",
        id=request_id,
        error=types.ErrorData.model_validate(_INVALID_REQUEST),
    )


async def run_stdio(server: Any) -> None:
    """Serve ``server`` (``Server`` or ``MCPServer``) over stdio, like ``run_stdio_async``,
    but answer lines that are not JSON-RPC messages (:func:`malformed_answer`) instead of
    dropping them: the SDK's stdio transport drops them silently, and a client whose
    request had an id would wait forever."""
    from mcp.server.stdio import stdio_server

    low = lowlevel_server(server)
    async with stdio_server() as (read_stream, write_stream):
        relay_send, relay_receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def relay() -> None:
            async with relay_send:
                async for item in read_stream:
                    if isinstance(item, Exception):
                        await write_stream.send(SessionMessage(malformed_answer(item)))
                    else:
                        await relay_send.send(item)

        async with anyio.create_task_group() as tg:
            tg.start_soon(relay)
            await low.run(relay_receive, write_stream, low.create_initialization_options())
            tg.cancel_scope.cancel()


#: the SDK's 406 (a bad ``Accept``) comes with no body on the extension's face
_NOT_ACCEPTABLE = InvalidRequest(
    detail="the Accept header must list application/json (and text/event-stream)"
).to_error()


def _tidy_error_body(body: bytes, status: int = 400) -> bytes | None:
    """A short ``-32600`` instead of the SDK's multi-line validator report, or for an
    empty 406, else ``None``."""
    if status == 406:
        if body.strip():
            return None
        return json.dumps({"jsonrpc": "2.0", "id": None, "error": _NOT_ACCEPTABLE}).encode()
    try:
        doc = json.loads(body)
    except ValueError:
        return None
    err = doc.get("error") if isinstance(doc, dict) else None
    if not isinstance(err, dict) or not is_sdk_validation_report(err.get("message", "")):
        return None
    doc["error"] = dict(_INVALID_REQUEST)
    return json.dumps(doc, separators=(",", ":")).encode()


#: a client that left before its request's body arrived: logged once a minute, not per request
_BODY_ABORTED = ThrottledLog(log, "request bodies aborted by the client")
#: the SDK's logger that reports such a body with a traceback (its session transport)
_SDK_TRANSPORT_LOGGER = "mcp.server.streamable_http"


class _ClientGoneFilter(logging.Filter):
    """Drops the SDK's traceback of a body the client aborted; counts it in the one
    throttled line instead."""

    def __init__(self, gone: type[BaseException]) -> None:
        super().__init__()
        self.gone = gone

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, self.gone):
            _BODY_ABORTED("POST (session transport)")
            return False
        return True


def tidy_http_errors(app: Any) -> Any:
    """Wrap the SDK's Streamable HTTP ASGI app: an invalid JSON-RPC envelope answers 400 with
    ``-32600`` and one short line, not ``-32602`` with pydantic's full report (which names
    library versions and internals); a 406 (bad ``Accept``) gets a JSON-RPC body; a client that leaves in the middle of its request's
    body (nobody to answer) is a line in the log at most once a minute, not a traceback per
    request."""
    from starlette.requests import ClientDisconnect

    sdk_log = logging.getLogger(_SDK_TRANSPORT_LOGGER)
    if not any(isinstance(f, _ClientGoneFilter) for f in sdk_log.filters):
        sdk_log.addFilter(_ClientGoneFilter(ClientDisconnect))

    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        try:
            if scope.get("type") != "http" or scope.get("method") != "POST":
                await app(scope, receive, send)
            else:
                await tidied(scope, receive, send)
        except ClientDisconnect:
            _BODY_ABORTED(f"{scope.get('method')} {scope.get('path')}")

    def tidied(scope: Any, receive: Any, send: Any) -> Any:
        """The app's answer to a POST, its 400 and 406 answers made tidy (a coroutine: the
        app's own, awaited by ``wrapped`` with no coroutine of this one around it)."""
        held: dict[str, Any] | None = None
        chunks: list[bytes] = []

        async def send_tidy(message: Any) -> None:
            nonlocal held
            if message["type"] == "http.response.start" and message.get("status") in (400, 406):
                held = message
                return
            if held is None or message["type"] != "http.response.body":
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body"):
                return
            start, held = held, None
            body = b"".join(chunks)
            tidy = _tidy_error_body(body, start.get("status", 400))
            if tidy is not None:
                drop = (b"content-length", b"content-type")
                headers = [(k, v) for k, v in start.get("headers", []) if k.lower() not in drop]
                headers += [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(tidy)).encode()),
                ]
                start = {**start, "headers": headers}
                body = tidy
            await send(start)
            await send({"type": "http.response.body", "body": body})

        return app(scope, receive, send_tidy)

    return wrapped
