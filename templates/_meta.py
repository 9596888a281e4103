"""The ``_meta`` helpers behind the generated ``meta`` module: hand-written, copied verbatim.
``meta`` names each task-related key of the rules overlay and builds a ``RelatedTask`` over
the one that ties a message to its task (R-META-1)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class RelatedTask:
    """The ``_meta`` entry ``{key: {id_field: task_id}}`` that ties a message to a task."""

    key: str
    id_field: str

    def meta(self, task_id: str) -> dict[str, Any]:
        """A ``_meta`` object holding only the entry for ``task_id`` (R-META-1)."""
        return {self.key: {self.id_field: task_id}}

    def attach(self, meta: Mapping[str, Any] | None, task_id: str) -> dict[str, Any]:
        """A copy of ``meta`` carrying the entry for ``task_id``."""
        out = dict(meta or {})
        out[self.key] = {self.id_field: task_id}
        return out

    def detach(self, meta: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """A copy of ``meta`` without the entry (R-META-3, R-NOTIFY-3); None when empty."""
        if not meta:
            return None
        out = {k: v for k, v in meta.items() if k != self.key}
        return out or None
