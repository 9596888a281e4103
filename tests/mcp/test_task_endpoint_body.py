"""The task endpoint's input limits: the request body cap counted over every chunk of a body
(``asgi_io.read_body``), and a request id freed with the last bytes of its answer
(``asgi_io.freeing_id``), through both front doors where a server is needed."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import anyio
import httpx

from testkit.inproc import serving
from testkit.sec_harness import RawHttp


def _streamed(body: bytes, piece: int) -> Iterator[bytes]:
    """``body`` in pieces of ``piece`` bytes, each its own write on the connection, paced so
    that the server reads them one by one (pacing only: nothing here is timed)."""
    for start in range(0, len(body), piece):
        yield body[start : start + piece]
        time.sleep(0.01)


def test_a_body_over_the_cap_is_refused_however_it_is_cut_R_SEC_3(front_door: str) -> None:
    """R-SEC-3 (denial of service): the request body cap counts the whole body. A 9,000-byte
    ``tasks/get`` streamed in 1,000-byte chunks under a 4,096-byte cap is refused as the same
    body sent in one piece is (413), through either door; one just under the cap, streamed
    the same way, is answered."""
    get = {"jsonrpc": "2.0", "id": 7, "method": "tasks/get", "params": {"taskId": "x"}}
    big = json.dumps({**get, "pad": "x" * 9000}).encode()
    with serving(front_door, max_request_body_size=4096) as srv, RawHttp(srv.url) as c:
        head = c._headers()
        whole = httpx.post(srv.url, content=big, headers=head, timeout=10)
        cut = httpx.post(srv.url, content=_streamed(big, 1000), headers=head, timeout=10)
        assert whole.status_code == 413, whole.text
        assert (cut.status_code, cut.text) == (whole.status_code, whole.text)
        small = json.dumps({**get, "pad": "x" * 3000}).encode()
        assert len(small) < 4096
        fits = httpx.post(srv.url, content=_streamed(small, 1000), headers=head, timeout=10)
        assert fits.status_code == 200, fits.text
        assert "-32602" in fits.text  # answered: an unknown task (R-SEC-1)


def test_the_body_reader_counts_every_chunk_to_the_byte_R_SEC_3() -> None:
    """The task endpoint's body reader (``asgi_io.read_body``), as the ASGI server hands it
    the chunks: a body of exactly the cap is read whole, one byte more is refused however it
    is cut (then the SDK answers 413 from the messages kept for it), a client that left
    gives no body; every message read is kept, in order, for the SDK."""
    from mcp_tasks.runtime.serve.asgi_io import read_body

    def feed(*chunks: bytes, left: bool = False) -> Any:
        messages = [
            {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1}
            for i, c in enumerate(chunks)
        ]
        if left:
            messages[-1]["more_body"] = True
            messages.append({"type": "http.disconnect"})
        else:
            del messages[-1]["more_body"]  # ASGI: absent means False
        pending = list(messages)

        async def receive() -> Any:
            return pending.pop(0)

        return receive, messages

    async def read(*chunks: bytes, left: bool = False) -> tuple[int, bytes | None]:
        receive, sent = feed(*chunks, left=left)
        got, body = await read_body(receive, 10)
        assert got == sent[: len(got)]
        return len(got), body

    async def main() -> None:
        assert await read(b"0123456789") == (1, b"0123456789")
        assert await read(b"0123", b"456", b"789") == (3, b"0123456789")
        assert await read(b"", b"01234", b"", b"56789") == (4, b"0123456789")
        assert await read(b"0123456789A") == (1, None)
        assert await read(b"0123", b"4567", b"89A") == (3, None)  # 11 bytes, 4 at most each
        assert await read(b"01234", b"56789", b"A", b"never read") == (3, None)
        assert await read(b"012", left=True) == (2, None)

    anyio.run(main)


def test_a_request_id_is_freed_with_the_last_bytes_of_its_answer() -> None:
    """``asgi_io.freeing_id``: the id of a request in flight on its session stays taken
    while its answer goes out (its start, its body in pieces) and is freed with the last
    piece, so a client may send the id again once, and only once, it has the answer."""
    from mcp_tasks.runtime.serve.asgi_io import freeing_id

    key = ("session-1", "7")
    in_flight = {key, ("session-1", "8")}
    sent: list[Any] = []

    async def send(message: Any) -> None:
        sent.append(message)

    async def main() -> None:
        freeing = freeing_id(send, in_flight, key)
        await freeing({"type": "http.response.start", "status": 200, "headers": []})
        await freeing({"type": "http.response.body", "body": b"{", "more_body": True})
        assert key in in_flight
        await freeing({"type": "http.response.body", "body": b"}"})
        assert in_flight == {("session-1", "8")}

    anyio.run(main)
    assert [m["type"] for m in sent] == ["http.response.start", *["http.response.body"] * 2]
