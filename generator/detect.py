"""detect: which known shape of task definitions a schema holds, by structure alone.

Found whatever the schema's revision or origin (a core schema, an extension's, a core schema
that has folded an extension in), so that a schema holding tasks is never refused as having
none, and a revision mcptask-gen does not know is generated with the rules overlay of the
shape it matches (``mcptask_gen.choose``). Two shapes are known:

- ``core``, the 2025-11-25 shape (R-*): request params with a ``task`` property (the task
  metadata, R-CREATE-1), or method definitions whose own ``method`` const is a task method
  (``tasks/get``, ``notifications/tasks/status``); the task object is carried in a
  result's ``task`` member;
- ``extension``, the shape of the tasks extension of 2026-07-28 (X-*): messages that extend
  the JSON-RPC envelope (``allOf``) with a ``method`` const under ``tasks/`` (``tasks/get``,
  ``tasks/update``, X-UPD-1) or ``notifications/tasks`` (X-NOTIF-1), and a flat create
  answer: the task's own members (``taskId``, ``status``, ``createdAt``) beside a
  ``resultType`` const (X-RT-1, X-TASK-1: flat, not wrapped in ``task``).

Nothing here names a definition: members and ``method`` consts only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcptask_gen.extselect import EXT_METHOD_PREFIXES
from mcptask_gen.load import LoadedSchema
from mcptask_gen.reshape import TASK_SHAPE
from mcptask_gen.select import Finder, scan_tasks

CORE, EXTENSION = "core", "extension"
#: The kind of overlay (``kind`` of ``schema/*.toml``) each shape is generated with.
SHAPES = (CORE, EXTENSION)


@dataclass(frozen=True)
class Found:
    """The task definitions of a schema, by shape."""

    shapes: tuple[str, ...]  # the shapes it matches: () (no tasks), one, or both
    methods: tuple[str, ...]  # every task method const, found through ``allOf`` too

    @property
    def shape(self) -> str | None:
        return self.shapes[0] if len(self.shapes) == 1 else None


def _parts(defs: dict[str, Any], node: Any, depth: int = 0) -> list[dict[str, Any]]:
    """``node`` and, through ``$ref`` and ``allOf``, the objects it is made of."""
    if not isinstance(node, dict) or depth > 16:
        return []
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        return _parts(defs, defs.get(ref.rsplit("/", 1)[-1]), depth + 1)
    out = [node]
    for member in node.get("allOf") or ():
        out.extend(_parts(defs, member, depth + 1))
    return out


def _members(defs: dict[str, Any], node: Any) -> dict[str, Any]:
    """The properties of ``node`` and of what it extends (``allOf``), the last one winning."""
    out: dict[str, Any] = {}
    for part in _parts(defs, node):
        props = part.get("properties")
        if isinstance(props, dict):
            out.update(props)
    return out


def _const(node: Any) -> str | None:
    value = node.get("const") if isinstance(node, dict) else None
    return value if isinstance(value, str) else None


def _task_methods(defs: dict[str, Any]) -> tuple[str, ...]:
    found = set()
    for name in sorted(defs):
        method = _const(_members(defs, defs[name]).get("method"))
        if method is not None and method.startswith(EXT_METHOD_PREFIXES):
            found.add(method)
    return tuple(sorted(found))


def _flat_create_result(defs: dict[str, Any]) -> bool:
    """Some result is a task itself beside a ``resultType`` const (X-RT-1)."""
    for name in sorted(defs):
        members = _members(defs, defs[name])
        if "method" in members or not TASK_SHAPE <= set(members):
            continue
        if _const(members.get("resultType")) is not None:
            return True
    return False


def find_tasks(loaded: LoadedSchema) -> Found:
    """The shapes of task definitions ``loaded`` holds (as published, before any reshape)."""
    defs = loaded.defs
    methods = _task_methods(defs)
    shapes = []
    scan = scan_tasks(Finder(loaded))
    if scan.augmentable or scan.task_methods:
        shapes.append(CORE)
    if methods and _flat_create_result(defs):
        shapes.append(EXTENSION)
    return Found(tuple(shapes), methods)
