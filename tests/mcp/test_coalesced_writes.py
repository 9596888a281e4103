"""uvicorn's HTTP protocol with one socket write per response (:mod:`mcp_tasks.runtime.
coalesced_writes`): the head and the body of an answer leave together, streamed events are
not held past the loop turn they were written in, and closing or aborting loses or reorders
nothing. Real uvicorn servers (both parsers), a real HTTP client, the real transport beneath
a recorder of its writes.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from mcp_tasks.examples import server as example
from mcp_tasks.runtime.http.coalesced_writes import HeldWrites, coalesced_writes

pytestmark = pytest.mark.anyio

BODY = b'{"jsonrpc":"2.0","id":1,"result":{}}'


class Recorder:
    """The real transport, its writes recorded."""

    def __init__(self, transport: asyncio.Transport, writes: list[bytes]) -> None:
        self.transport = transport
        self.writes = writes

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))
        self.transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)


def recorded(protocol: type[Any], writes: list[bytes]) -> type[Any]:
    """``protocol`` over a recorder of what reaches the real transport."""

    def connection_made(self: Any, transport: asyncio.Transport) -> None:
        protocol.connection_made(self, Recorder(transport, writes))

    return type("Recorded", (protocol,), {"connection_made": connection_made})


async def app(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    if scope["path"] == "/json":
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(BODY))]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": BODY})
        return
    # /stream: an event, then the next only once the client has read the first
    got_first: anyio.Event = scope["app_state"]["got_first"]
    headers = [(b"content-type", b"text/event-stream")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"data: one\n\n", "more_body": True})
    await got_first.wait()
    await send({"type": "http.response.body", "body": b"data: two\n\n", "more_body": False})


@asynccontextmanager
async def serving(protocol: type[Any], state: dict[str, Any]) -> AsyncIterator[str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]

    async def with_state(scope: Any, receive: Any, send: Any) -> None:
        await app({**scope, "app_state": state}, receive, send)

    config = uvicorn.Config(with_state, http=protocol, ws="none", lifespan="off", log_level="error")
    server = uvicorn.Server(config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [sock])
        while not server.started:
            await anyio.sleep(0.01)
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True


@pytest.mark.parametrize("base", [HttpToolsProtocol, H11Protocol], ids=["httptools", "h11"])
async def test_a_json_answer_is_one_write_of_its_head_and_body(base: type[Any]) -> None:
    writes: list[bytes] = []
    async with serving(recorded(coalesced_writes(base), writes), {}) as url:
        async with httpx.AsyncClient() as client:
            for _ in range(3):  # kept alive: each answer on the same connection
                answer = await client.get(f"{url}/json")
                assert answer.status_code == 200 and answer.content == BODY
    assert len(writes) == 3
    assert all(w.startswith(b"HTTP/1.1 200") and w.endswith(BODY) for w in writes)


async def test_uvicorn_alone_writes_the_head_and_the_body_apart() -> None:
    """What the protocol changes: without it, two writes per answer."""
    writes: list[bytes] = []
    async with serving(recorded(HttpToolsProtocol, writes), {}) as url:
        async with httpx.AsyncClient() as client:
            assert (await client.get(f"{url}/json")).content == BODY
    assert len(writes) == 2 and writes[1] == BODY


@pytest.mark.parametrize("base", [HttpToolsProtocol, H11Protocol], ids=["httptools", "h11"])
async def test_a_streamed_event_is_not_held_for_the_next(base: type[Any]) -> None:
    """The second event is sent only once the client has read the first: a first event held
    until more came would hang this (bounded by the fail_after)."""
    state = {"got_first": anyio.Event()}
    writes: list[bytes] = []
    async with serving(recorded(coalesced_writes(base), writes), state) as url:
        async with httpx.AsyncClient() as client:
            with anyio.fail_after(10):
                async with client.stream("GET", f"{url}/stream") as answer:
                    lines = answer.aiter_lines()
                    assert await anext(lines) == "data: one"
                    state["got_first"].set()
                    rest = [line async for line in lines if line]
    assert rest == ["data: two"]
    assert b"data: one" in writes[0]  # the head and the first event: one write


async def test_the_example_server_protocol_coalesces_under_its_deadlines() -> None:
    writes: list[bytes] = []
    guarded = example.http_protocol(example._parse_args(["--http", "127.0.0.1:1"]))
    async with serving(recorded(guarded, writes), {}) as url:
        async with httpx.AsyncClient() as client:
            assert (await client.get(f"{url}/json")).content == BODY
    assert len(writes) == 1 and writes[0].endswith(BODY)


class FakeTransport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closing = False
        self.aborted = False
        self.buffered = 0

    def write(self, data: bytes) -> None:
        assert not self.closing, "written after close"
        self.writes.append(data)

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def abort(self) -> None:
        self.closing = self.aborted = True

    def write_eof(self) -> None:
        self.writes.append(b"<eof>")

    def get_write_buffer_size(self) -> int:
        return self.buffered

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else default


async def test_writes_of_one_turn_leave_together_at_its_end_in_order() -> None:
    real = FakeTransport()
    held = HeldWrites(real, asyncio.get_running_loop())  # type: ignore[arg-type]
    held.write(b"a")
    assert real.writes == [] and held.get_write_buffer_size() == 1
    await asyncio.sleep(0)  # the turn ends
    assert real.writes == [b"a"]
    held.write(b"b")
    held.write(b"c")  # a second write: both leave at once
    assert real.writes == [b"a", b"bc"]
    held.writelines([b"d", bytearray(b"e"), memoryview(b"f")])
    assert real.writes == [b"a", b"bc", b"de"]
    await asyncio.sleep(0)
    assert real.writes == [b"a", b"bc", b"de", b"f"]
    held.write(b"")  # nothing to write: nothing scheduled
    await asyncio.sleep(0)
    assert len(real.writes) == 4


async def test_close_writes_what_is_held_first_and_abort_drops_it() -> None:
    real = FakeTransport()
    held = HeldWrites(real, asyncio.get_running_loop())  # type: ignore[arg-type]
    held.write(b"last words")
    held.close()
    assert real.writes == [b"last words"] and real.closing
    await asyncio.sleep(0)  # the scheduled flush finds nothing to write
    assert real.writes == [b"last words"]

    real = FakeTransport()
    held = HeldWrites(real, asyncio.get_running_loop())  # type: ignore[arg-type]
    held.write(b"before the end")
    held.write_eof()
    assert real.writes == [b"before the end", b"<eof>"]

    real = FakeTransport()
    held = HeldWrites(real, asyncio.get_running_loop())  # type: ignore[arg-type]
    held.write(b"unsent")
    held.abort()
    await asyncio.sleep(0)
    assert real.writes == [] and real.aborted


async def test_nothing_is_written_to_a_transport_that_closed_meanwhile() -> None:
    real = FakeTransport()
    held = HeldWrites(real, asyncio.get_running_loop())  # type: ignore[arg-type]
    held.write(b"late")
    real.closing = True  # the client left
    await asyncio.sleep(0)
    assert real.writes == []
    assert held.get_extra_info("peername") == ("127.0.0.1", 1)  # anything else: the real one's
