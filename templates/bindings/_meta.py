"""The ``_meta`` helpers behind the generated ``meta`` module: hand-written, copied verbatim.
``meta`` names each task-related key of the rules overlay and builds a ``RelatedTask`` over
the one that ties a message to its task (R-META-1); an extension's face checks the
per-request capability envelope with ``DeclaredExtension`` (X-CAP-1)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard


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


def _mapping(value: Any) -> TypeGuard[Mapping[str, Any]]:
    """Whether ``value`` is a ``Mapping``; a ``dict`` (what JSON gives) without the ABC check
    (every request of the extension's face asks twice)."""
    return type(value) is dict or isinstance(value, Mapping)


@dataclass(frozen=True, slots=True)
class DeclaredExtension:
    """An extension a client declares on one request: ``_meta[key].extensions[id]`` is an
    object (the per-request capability envelope, X-CAP-1; never inferred from earlier
    requests)."""

    key: str
    extension_id: str

    def declared(self, meta: Mapping[str, Any] | None) -> bool:
        caps = meta.get(self.key) if _mapping(meta) else None
        extensions = caps.get("extensions") if _mapping(caps) else None
        return _mapping(extensions) and _mapping(extensions.get(self.extension_id))

    def required(self) -> dict[str, Any]:
        """The ``requiredCapabilities`` of a request that lacked it (X-CAP-8)."""
        return {"extensions": {self.extension_id: {}}}
