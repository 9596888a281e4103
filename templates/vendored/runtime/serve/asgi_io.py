"""The task endpoint's ASGI plumbing (:mod:`.endpoint`): a request's body read whole
(:func:`read_body`) and replayed to the app it hands the request on to (:func:`replay`), and
a ``send`` that frees the request's id as its answer's last bytes go out (:func:`freeing_id`).
"""

from __future__ import annotations

from typing import Any

__all__ = ["freeing_id", "read_body", "replay"]


async def read_body(receive: Any, limit: int) -> tuple[list[Any], bytes | None]:
    """The messages read and the whole body; ``None`` for the body when it is over
    ``limit`` or the client left (the SDK answers those, from the replayed messages)."""
    messages: list[Any] = []
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return messages, None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return messages, None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return messages, b"".join(chunks)


def replay(messages: list[Any], receive: Any) -> Any:
    """``receive`` that hands out ``messages`` first, then the client's own."""
    pending = list(messages)

    async def replayed() -> Any:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed


def freeing_id(send: Any, in_flight: set[tuple[str, str]], key: tuple[str, str]) -> Any:
    """``send`` that takes ``key`` (a request's session and id) out of ``in_flight`` as the
    answer's last bytes go out: the client may use the id again once it has the answer (a
    request pipelined behind this one on its connection starts then, before this request's
    own code has returned)."""

    async def freeing(message: Any) -> None:
        if message.get("type") == "http.response.body" and not message.get("more_body"):
            in_flight.discard(key)
        await send(message)

    return freeing
