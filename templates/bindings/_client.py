"""The requestor's side behind each face's generated ``client`` module: hand-written, copied
verbatim.

A face's ``client`` subclasses :class:`ClientBase` once as ``TasksClient``: one typed method
per ``tasks/*`` request a requestor sends and per request that may become a task, the face's
models in and out, as its ``handlers`` module is the server's side. It sends nothing itself:
a :class:`Transport` does, a runtime's client (``mcp_tasks.runtime``: ``connect()``'s
session, ``TaskRequestor``, ``ExtTaskRequestor``) or anything with its one method, so these
bindings need pydantic alone, and a client on a package regenerated from a revised schema
reads the revision's fields, typed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, TypeVar

from pydantic import BaseModel

from ._handlers import dump
from ._methods import UnionParser

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Wire:
    """What a transport needs of a face to send its requests: the revision it speaks, its
    kind (``core``, ``extension``), the extension it is (None for a core face), and the
    requests that may become a task (sent once: never again across a dropped connection)."""

    revision: str
    kind: str
    extension: str | None
    creates: frozenset[str]


class Transport(Protocol):
    """Sends one request of the face ``wire`` and returns its result as the wire has it; a
    JSON-RPC error answer is raised."""

    async def send_task_request(
        self, wire: Wire, method: str, params: Mapping[str, Any]
    ) -> Mapping[str, Any]: ...


def params_of(params: BaseModel | Mapping[str, Any] | None) -> dict[str, Any]:
    """A request's params as the wire has them (fields left unset stay absent)."""
    if params is None:
        return {}
    if isinstance(params, BaseModel):
        return dump(params)
    return dict(params)


class ClientBase:
    """A face's typed requests over a :class:`Transport` (subclassed once per face)."""

    wire: ClassVar[Wire]

    def __init__(self, transport: Transport) -> None:
        self.transport = transport

    async def send(
        self, method: str, params: BaseModel | Mapping[str, Any] | None
    ) -> Mapping[str, Any]:
        """``method`` with ``params``: its raw result."""
        return await self.transport.send_task_request(self.wire, method, params_of(params))

    async def request(
        self, method: str, params: BaseModel | Mapping[str, Any] | None, parse: UnionParser[R]
    ) -> R:
        """``method`` with ``params``: its result, validated by ``parse``."""
        return parse(await self.send(method, params))
