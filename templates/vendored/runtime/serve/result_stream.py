"""A held core ``tasks/result``'s own stream on the task endpoint (2025-11-25, R-INPUT-3).

While a task waits for input, its input requests ride the stream of the ``tasks/result``
request that waits for it, and the requestor answers each one with a JSON-RPC response it
POSTs to the endpoint. The task endpoint answers a ``tasks/result`` with one
``application/json`` response when its task ends without asking anything (at once, in the
common case); :class:`ResultStream` turns that answer into ``text/event-stream``, as the
SDK's transport answers a POST, the moment the task asks for input or keeps the request
waiting past :data:`STREAM_AFTER_S` (the headers go out, so nothing between the client and
the server takes the wait for a dead one). Each input request goes out as an SSE event with
an id of this stream's own: random, so no other client guesses it, and a string, so never
one the SDK's session issues. The answer to the ``tasks/result`` ends the stream.

:class:`Answers` holds the ids sent and awaiting their response. The task endpoint gives it
every POSTed JSON-RPC response first (:meth:`Answers.settle`, answered ``202``); a response
it does not know goes to the SDK's transport as before.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from typing import Any, Final

import anyio
import pydantic_core

from ...errors import InvalidRequest, error_from_payload

__all__ = ["STREAM_AFTER_S", "Answers", "ResultStream", "is_response", "to_json"]

#: how long a ``tasks/result`` waits for its task before its answer becomes a stream
STREAM_AFTER_S: Final = 10.0
_SSE_HEADERS: Final = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"connection", b"keep-alive"),
]


def to_json(doc: Any) -> bytes:
    """``doc`` as JSON; a string that is not valid Unicode (a lone surrogate a client sent
    as a ``\\uXXXX`` escape, now in a result) as its escape again, as the SDK writes it."""
    try:
        return pydantic_core.to_json(doc)
    except ValueError:  # PydanticSerializationError among them
        return json.dumps(doc, separators=(",", ":")).encode()


def is_response(doc: Any) -> bool:
    """Whether ``doc`` is a JSON-RPC response (an id, a result or an error, no method)."""
    return (
        isinstance(doc, dict)
        and "method" not in doc
        and isinstance(doc.get("id"), str)
        and ("result" in doc or "error" in doc)
    )


class _Awaited:
    __slots__ = ("answer", "done")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.answer: Mapping[str, Any] | None = None


class Answers:
    """The input requests sent on the streams of one task endpoint, awaiting their
    response: keyed by ``(session, id)`` (``session`` ``None`` for stateless HTTP)."""

    def __init__(self) -> None:
        self._awaited: dict[tuple[str | None, str], _Awaited] = {}

    def __len__(self) -> int:
        return len(self._awaited)

    def expect(self, session_id: str | None) -> tuple[str, _Awaited]:
        rid = f"mcp-tasks-{secrets.token_urlsafe(12)}"
        awaited = self._awaited[(session_id, rid)] = _Awaited()
        return rid, awaited

    def drop(self, session_id: str | None, rid: str) -> None:
        self._awaited.pop((session_id, rid), None)

    def settle(self, session_id: str | None, doc: Mapping[str, Any]) -> bool:
        """Hand the response ``doc`` POSTed on ``session_id`` to the request awaiting it;
        ``False`` when no request of ours awaits it (the SDK's transport takes it)."""
        awaited = self._awaited.pop((session_id, doc["id"]), None)
        if awaited is None:
            return False
        awaited.answer = doc
        awaited.done.set()
        return True


class ResultStream:
    """The stream of one ``tasks/result`` request (see the module): ``send`` is its ASGI
    ``send``; nothing is written until :meth:`start` or :meth:`send_request`."""

    def __init__(self, send: Any, session_id: str | None, answers: Answers) -> None:
        self._send = send
        self.session_id = session_id
        self.answers = answers
        self._lock = anyio.Lock()
        self.started = False

    async def start(self) -> None:
        """The response's headers, as the SDK's transport writes them for a stream."""
        async with self._lock:
            await self._start()

    async def _start(self) -> None:
        if self.started:
            return
        self.started = True
        headers = list(_SSE_HEADERS)
        if self.session_id is not None:
            headers.append((b"mcp-session-id", self.session_id.encode()))
        await self._send({"type": "http.response.start", "status": 200, "headers": headers})

    async def _event(self, doc: Mapping[str, Any], more: bool = True) -> None:
        async with self._lock:
            await self._start()
            body = b"event: message\ndata: " + to_json(doc) + b"\n\n"
            await self._send({"type": "http.response.body", "body": body, "more_body": more})

    async def send_request(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """An input request on this stream; its result, or its error as a ``TaskError``."""
        rid, awaited = self.answers.expect(self.session_id)
        try:
            await self._event({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
            await awaited.done.wait()
        finally:
            self.answers.drop(self.session_id, rid)
        answer = awaited.answer or {}
        error = answer.get("error")
        if error is not None:
            if not isinstance(error, dict) or not isinstance(error.get("code"), int):
                raise InvalidRequest(detail=f"the answer to {method} holds no error object")
            raise error_from_payload(error)
        result = answer.get("result")
        if not isinstance(result, dict):
            raise InvalidRequest(detail=f"the answer to {method} holds no result object")
        return result

    async def finish(self, doc: Mapping[str, Any]) -> None:
        """The request's answer, the stream's last event."""
        await self._event(doc, more=False)

    async def close(self) -> None:
        """The stream's end without an answer (its session ended), as the SDK's transport
        ends the streams of a session it terminates."""
        async with self._lock:
            await self._start()
            await self._send({"type": "http.response.body", "body": b"", "more_body": False})
