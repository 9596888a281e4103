"""Paths into a JSON document (nested dicts and lists), shared by the fuzzers: every path
in a document, and a value put at or dropped from one path."""

from __future__ import annotations

from typing import Any

Path = tuple[Any, ...]


def json_paths(value: Any, prefix: Path = ()) -> list[Path]:
    """Every path in ``value``, the empty one (``value`` itself) first."""
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += json_paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += json_paths(v, (*prefix, i))
    return out


def set_at(doc: Any, path: Path, value: Any) -> Any:
    """``doc`` with ``value`` at ``path`` (set in place; the empty path gives ``value``)."""
    if not path:
        return value
    current = doc.get(path[0]) if isinstance(doc, dict) else doc[path[0]]
    doc[path[0]] = set_at(current, path[1:], value)
    return doc


def drop_at(doc: Any, path: Path) -> Any:
    """``doc`` without the member at ``path`` (deleted in place)."""
    parent = doc
    for p in path[:-1]:
        parent = parent[p]
    del parent[path[-1]]
    return doc
