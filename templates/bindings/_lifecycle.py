"""The lifecycle machinery behind the generated ``lifecycle`` module: hand-written, copied
verbatim. ``lifecycle`` holds the revision's statuses, terminal set and allowed moves, and
exports the methods of a ``Lifecycle`` over them as functions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Generic, TypeVar

S = TypeVar("S", bound=StrEnum)


class InvalidTransition(ValueError):
    """A move the lifecycle does not allow (R-STATE-2, R-STATE-3)."""

    def __init__(self, src: StrEnum, dst: StrEnum, why: str = "move not allowed") -> None:
        self.src = src
        self.dst = dst
        super().__init__(f"invalid task status move {src.value!r} -> {dst.value!r}: {why}")


@dataclass(frozen=True, slots=True)
class Lifecycle(Generic[S]):
    """The statuses of ``status``, the moves ``transitions`` allows, the ``terminal`` set."""

    status: type[S]
    transitions: Mapping[S, frozenset[S]]
    terminal: frozenset[S]

    def sources(self) -> dict[S, frozenset[S]]:
        """For each status, the statuses a task may be in to move to it."""
        return {
            dst: frozenset(src for src, dsts in self.transitions.items() if dst in dsts)
            for dst in self.transitions
        }

    def is_terminal(self, status: S | str) -> bool:
        return self.status(status) in self.terminal

    def can_transition(self, src: S | str, dst: S | str) -> bool:
        return self.status(dst) in self.transitions[self.status(src)]

    def validate_transition(self, src: S | str, dst: S | str) -> None:
        """Raise ``InvalidTransition`` unless ``src -> dst`` is an allowed move."""
        if not self.can_transition(src, dst):
            old, new = self.status(src), self.status(dst)
            why = "terminal status" if old in self.terminal else "move not allowed"
            raise InvalidTransition(old, new, why)
