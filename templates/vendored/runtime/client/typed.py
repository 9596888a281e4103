"""The runtime's clients as the ``Transport`` of a generated face's typed ``TasksClient``.

A package's bindings carry, per face, a ``client`` module: ``TasksClient``, one typed method
per ``tasks/*`` request and per request that may become a task, over a minimal transport
protocol (``_client.Transport``: ``send_task_request(wire, method, params)``). The
runtime's requestors implement it (``TaskRequestor``, so the session ``connect()`` opens,
and ``ExtTaskRequestor``), for the faces of this package and of any package mcptask-gen
wrote, as the server adopts a user's handlers (``bindings``): the typed client parses each
answer with its own package's models, so a field a revised schema added is read, typed.

What is sent follows the face the session negotiated: a typed client of another face is
refused in one line (``TaskNotSupported``); a face of a revision this runtime does not know,
in a shape it knows, is sent as that shape (``serves``, the rule the server applies). A
request about an existing task is sent again across a dropped connection (``retry_s``); a
request that may create a task is sent once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Generic, Protocol, Self, TypeVar

from ... import descriptor as own
from ...protocol import REVISION
from ...serves import verdict
from ..faces import EXTENSION
from ..sdk import send_raw_request
from .status import TaskNotSupported

if TYPE_CHECKING:
    from mcp.client.session import ClientSession

__all__ = ["RequestorTransport", "SessionTransport", "check_face", "face_of", "negotiated"]


class _Wire(Protocol):
    """What this runtime reads of a generated face's ``Wire`` (``_client``)."""

    @property
    def revision(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def extension(self) -> str | None: ...
    @property
    def creates(self) -> frozenset[str]: ...


class _ExtSender(Protocol):
    """What a requestor's extension side (``ExtTaskRequestor``) does for a typed client."""

    async def send_task_request(
        self, wire: Any, method: str, params: Mapping[str, Any]
    ) -> dict[str, Any]: ...


C = TypeVar("C")


def face_of(wire: _Wire) -> str | None:
    """The revision of this runtime's face that speaks ``wire`` (None: none does)."""
    found = verdict([(wire.revision, wire.kind, wire.extension)], own.BINDINGS_API, None)
    return found.faces[0].rules


def check_face(wire: _Wire, negotiated: str) -> None:
    """``TaskNotSupported`` unless a session on ``negotiated`` speaks ``wire``."""
    face = face_of(wire)
    if face != negotiated:
        how = f"connect with face={face!r}" if face else "this runtime speaks no face of it"
        raise TaskNotSupported(
            f"a TasksClient of revision {wire.revision} ({wire.kind}) over a session on"
            f" {negotiated}: {how}"
        )


def negotiated(requestor: RequestorTransport) -> str:
    """The face ``requestor``'s session speaks: the tasks extension's revision, else the
    core revision."""
    if requestor.ext is not None and EXTENSION is not None:
        return str(EXTENSION.REVISION)
    return REVISION


class RequestorTransport:
    """``TaskRequestor`` as the bindings' ``Transport``, and :meth:`typed`."""

    if TYPE_CHECKING:
        session: ClientSession

        @property
        def ext(self) -> _ExtSender | None: ...

        async def _send(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]: ...

    def typed(self, client: Callable[[Self], C]) -> C:
        """``client`` (a generated face's ``TasksClient``, of any package mcptask-gen wrote)
        over this requestor: its methods answer with its own package's models;
        ``TaskNotSupported`` when the session speaks another face."""
        check_face(getattr(client, "wire", None) or _no_wire(client), negotiated(self))
        return client(self)

    async def send_task_request(
        self, wire: Any, method: str, params: Mapping[str, Any]
    ) -> dict[str, Any]:
        """One request of a generated face's typed ``TasksClient``, on the face this session
        negotiated: about an existing task, sent again across a dropped connection; one that
        may create a task, sent once."""
        check_face(wire, negotiated(self))
        if (ext := self.ext) is not None:
            return await ext.send_task_request(wire, method, params)
        if method in wire.creates:
            return await send_raw_request(self.session, method, params)
        return await self._send(method, params)


R = TypeVar("R", bound=RequestorTransport)


class SessionTransport(Generic[R]):
    """A ``TasksClientSession`` (what ``connect()`` opens) as the bindings' ``Transport``:
    its requestor's (``self.tasks``, an ``R``)."""

    if TYPE_CHECKING:
        tasks: R

    def typed(self, client: Callable[[R], C]) -> C:
        """:meth:`RequestorTransport.typed` of this session's requestor."""
        return self.tasks.typed(client)

    async def send_task_request(
        self, wire: Any, method: str, params: Mapping[str, Any]
    ) -> dict[str, Any]:
        return await self.tasks.send_task_request(wire, method, params)


def _no_wire(client: object) -> _Wire:
    raise TypeError(f"{client!r} is not a generated face's TasksClient (it has no wire)")
