"""The method-table types behind the generated ``methods`` module: hand-written, copied
verbatim. ``methods`` fills ``METHODS`` and ``AUGMENTABLE`` with them and builds its parsers
of the unions discriminated on ``method``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from pydantic import BaseModel

if TYPE_CHECKING:  # imported on first use: pydantic's TypeAdapter costs import time
    from pydantic import TypeAdapter

T = TypeVar("T")
Side = Literal["client", "server"]


@dataclass(frozen=True, slots=True)
class MethodSpec:
    """One ``tasks/*`` method: its request, params and result models, and who may send it."""

    method: str
    kind: Literal["request", "notification"]
    request: type[BaseModel]
    #: the params model (None: the method has none), or an annotated union of variants
    params: Any
    #: the result model, or (a union of status variants) an annotated union: validate it
    #: with a ``UnionParser``
    result: Any
    sent_by: frozenset[Side]
    handler: str


@dataclass(frozen=True, slots=True)
class AugmentableSpec:
    """A request type that may be task-augmented, answered by ``answer`` (R-CREATE-2)."""

    method: str
    request_name: str
    receiver: Side
    sent_by: frozenset[Side]
    capability_path: tuple[str, ...]
    answer: type[BaseModel]
    hook: str


class UnionParser(Generic[T]):
    """Validate a whole JSON-RPC message against a union discriminated on ``method``; the
    pydantic ``TypeAdapter`` is built on first use."""

    def __init__(self, union: Any, doc: str) -> None:
        self._union = union
        self._adapter: TypeAdapter[T] | None = None
        self.__doc__ = doc

    def __call__(self, message: Mapping[str, Any]) -> T:
        if self._adapter is None:
            from pydantic import TypeAdapter

            self._adapter = TypeAdapter(self._union)
        return self._adapter.validate_python(message)
