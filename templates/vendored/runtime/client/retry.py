"""A client that follows a task across a dropped connection (a server restart, say).

The ``mcp`` 2.3 Streamable HTTP client ends its whole session when one POST cannot connect
(the ``ConnectError`` leaves its task group, cancelling every caller). :func:`http_client`
is an ``httpx2.AsyncClient`` for ``streamable_http_client(url, http_client=...)`` (or
``mcp.Client(streamable_http_client(...))``) whose failed requests are answered instead,
on the client side, as a JSON-RPC error of that one request (:data:`CONNECTION_FAILED`,
marked in its ``data``); the session lives on.

The requestors (``TaskRequestor`` on both faces) then send their requests about an existing
task (``tasks/get``, ``tasks/result``, ``tasks/cancel``, ``tasks/update``) through
:func:`retrying`: a failed connection, or an HTTP 5xx of a proxy in front of a restarting
server, is retried with backoff until ``retry_s`` has passed; what this session cannot
recover from (the server forgot the session after its restart: "Session terminated"; a
stdio server that exited: "Connection closed"), and a deadline that passes, raise
:class:`ConnectionLost` carrying the task id, to ask again on a new session (with the same
bearer token, R-SEC-1). A ``tools/call`` is never retried: it would start the work twice.

Between two polls both requestors sleep :func:`poll_delay`: the interval the server asked
for (R-GET-1, X-POLL-2), never less, plus a random 2-10%. The jitter spreads many
requestors' polls, and keeps a poll off the instant a server closes an idle keep-alive
connection: uvicorn's default keep-alive is 5 s, the interval FastMCP suggests is 5000 ms,
and a request sent on a connection the server is closing fails with ``ReadError``, which
the stock ``mcp`` HTTP client cannot recover from (its session ends).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, Final, TypeVar

import anyio
import httpx2
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED

from ..polling import poll_delay

__all__ = [
    "CONNECTION_FAILED",
    "ConnectionLost",
    "ServerUnreachable",
    "http_client",
    "is_connection_failure",
    "leaves",
    "one_error",
    "poll_delay",
]

#: the message of a request the connection failed (answered by :func:`http_client`)
CONNECTION_FAILED: Final = "Connection failed"
#: the ``data`` key marking such an answer as ours, not a server's
MARK: Final = "io.github.mcptask/connection"
#: what the SDK answers a request whose HTTP status was 5xx without a JSON-RPC body
_SERVER_HTTP_ERROR: Final = "Server returned an error response"
#: what the SDK answers when this session cannot go on (its server is gone or forgot it)
_SESSION_ENDED: Final = frozenset({"Connection closed", "Session terminated", "Session not found"})
_T = TypeVar("_T")


class ConnectionLost(Exception):
    """The connection to the server dropped while following ``task_id`` and did not come
    back within the deadline (or came back without this session). The task may well be
    there still: ask for it by its id on a new session (the same bearer token)."""

    def __init__(self, task_id: str | None, cause: BaseException) -> None:
        self.task_id = task_id
        self.cause = cause
        what = f"task {task_id}" if task_id else "the server"
        super().__init__(
            f"lost the connection while following {what} ({_describe(cause)});"
            f" ask for it again by its id once the server answers"
        )


class ServerUnreachable(ConnectionError):
    """No MCP server answered at the URL (``client.connect``): nothing listens there."""


def _describe(exc: BaseException) -> str:
    if isinstance(exc, MCPError):
        return f"{exc.code}: {exc.message}"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class _AnswerFailures(httpx2.AsyncBaseTransport):
    """A POST that fails on the way (no connection, the connection dropped) answers HTTP 503
    with a JSON-RPC error of that request, so the SDK ends that request, not the session."""

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            response = await self.inner.handle_async_request(request)
            if request.method == "DELETE" and response.status_code == 404:
                # the session's end, where a restarted server no longer knows it: it is
                # gone, as asked (not a warning in the client's log)
                await response.aclose()
                return httpx2.Response(204, request=request)
            return response
        except httpx2.TransportError as exc:
            if request.method != "POST":
                raise  # the SDK's GET stream and DELETE handle their own failures
            error = {
                "code": CONNECTION_CLOSED,  # the SDK's code for a connection gone
                "message": f"{CONNECTION_FAILED}: {type(exc).__name__}: {exc}",
                "data": {MARK: str(request.url)},
            }
            body = {"jsonrpc": "2.0", "id": None, "error": error}
            return httpx2.Response(503, json=body, request=request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def http_client(
    *,
    headers: dict[str, str] | None = None,
    timeout: httpx2.Timeout | None = None,
    **kwargs: Any,
) -> httpx2.AsyncClient:
    """An ``httpx2.AsyncClient`` for the SDK's Streamable HTTP client whose failed requests
    answer :data:`CONNECTION_FAILED` instead of ending the session (see the module's
    docstring). ``timeout``: by default 30 s, and no read timeout (a ``tasks/result`` waits
    as long as its task runs)."""
    return httpx2.AsyncClient(
        headers=headers,
        timeout=timeout if timeout is not None else httpx2.Timeout(30, read=None),
        transport=_AnswerFailures(httpx2.AsyncHTTPTransport()),
        **kwargs,
    )


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside ``exc``'s groups (a transport's task group raises several)."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in leaves(sub)]
    return [exc]


@contextmanager
def one_error() -> Iterator[None]:
    """An error raised inside as itself when a task group wrapped it alone in an
    ``ExceptionGroup`` (a transport's streams run in one); several stay grouped."""
    try:
        yield
    except BaseExceptionGroup as group:
        one, *more = leaves(group)
        if more:
            raise
        raise one from None


def is_connection_failure(exc: BaseException) -> bool:
    """A request that did not reach a server able to answer it: worth sending again."""
    if isinstance(exc, MCPError):
        data = exc.error.data
        return (isinstance(data, dict) and MARK in data) or exc.message == _SERVER_HTTP_ERROR
    return isinstance(exc, httpx2.TransportError)


def _session_ended(exc: BaseException) -> bool:
    if isinstance(exc, MCPError):
        return exc.message in _SESSION_ENDED
    return isinstance(exc, (anyio.ClosedResourceError, anyio.BrokenResourceError))


async def retrying(send: Callable[[], Awaitable[_T]], task_id: str | None, retry_s: float) -> _T:
    """``send()``, again after a connection failure until ``retry_s`` seconds have passed
    (backoff from 0.1 s to 2 s); :class:`ConnectionLost` when it gives up or this session
    has ended. Any other error is the server's answer, raised as it is."""
    deadline = anyio.current_time() + retry_s
    pause = 0.1
    while True:
        try:
            return await send()
        except Exception as exc:
            if _session_ended(exc):
                raise ConnectionLost(task_id, exc) from exc
            if not is_connection_failure(exc):
                raise
            if anyio.current_time() + pause > deadline:
                raise ConnectionLost(task_id, exc) from exc
        await anyio.sleep(pause)
        pause = min(pause * 2, 2.0)
