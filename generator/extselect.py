"""select for an extension's schema (``kind = "extension"``): the task definitions by structure.

Run on the reshaped definitions (``mcptask_gen.reshape``). Found, with no list of names:

- the task shape: an object whose properties include ``taskId``, ``status``, ``createdAt``;
  the base task has the status enum, each variant one ``const`` status (what it carries is
  its other required members);
- the union of the variants (``DetailedTask``): a union discriminated on ``status``;
- the create answer: an ``allOf`` of the base task and a ``resultType`` const (X-RT-1);
- the task methods: ``method`` consts under ``tasks/`` or ``notifications/tasks``, requests
  paired with their results by name (``GetTaskRequest`` -> ``GetTaskResult``);
- every other definition of the extension's own (``own_definitions``): one that no other
  definition of the schema as published refers to. The core definitions an extension's schema
  carries are copies of the core types its own types refer to (ext-tasks copies them in,
  unchanged), so each is referred to; its own types are referred to by none (ext-tasks
  inlines them where they are used). They are generated, with what they refer to, so nothing
  the extension defines is left out (``TaskSubscriptionAcknowledgedNotifications``, the
  filter its ``notifications/subscriptions/acknowledged`` echoes, X-NOTIF-3, is referred to by
  no task type). In a schema generated with rules that are not its own (a revision that has
  folded the extension's definitions into its core schema, ``mcptask_gen.choose``), only
  those that mention tasks (a member named ``task...`` or a task method,
  ``mentions_tasks``): the core's roots no one refers to either (``ClientRequest``,
  ``JSONRPCMessage``) are not the extension's.

What the schema cannot say (the capability, the subscription filter, tool-level support)
comes from the overlay's ``[extension]`` and ``[tool_task_support]``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from mcptask_gen.errors import GeneratorError
from mcptask_gen.load import LoadedSchema
from mcptask_gen.overlay import Overlay
from mcptask_gen.reshape import TASK_SHAPE
from mcptask_gen.select import (
    CapabilityTree,
    Finder,
    FoundAugmentable,
    FoundMethod,
    Selection,
    cut,
    ref_name,
)

#: ``notifications/tasks`` has no trailing slash in the extension (X-NOTIF-1).
EXT_METHOD_PREFIXES = ("tasks/", "notifications/tasks")


def _consts(defs: dict[str, Any], node: Any) -> tuple[str, ...] | None:
    """The values of a string enum given as ``enum`` or as an ``anyOf`` of consts."""
    target = defs.get(ref_name(node) or "", node)
    if not isinstance(target, dict):
        return None
    if isinstance(target.get("enum"), list):
        return tuple(str(v) for v in target["enum"])
    members = target.get("anyOf")
    if isinstance(members, list) and members:
        values = [m.get("const") if isinstance(m, dict) else None for m in members]
        if all(isinstance(v, str) for v in values):
            return tuple(str(v) for v in values)
    return None


def own_definitions(document: dict[str, Any]) -> tuple[str, ...]:
    """The definitions of a schema (as published, before ``reshape``) that no other of its
    definitions refers to by a local ``$ref``, by name: an extension's own (module docstring)."""
    defs = document.get("$defs") if "$defs" in document else document.get("definitions")
    if not isinstance(defs, dict):
        return ()
    referred: set[str] = set()
    for name, node in defs.items():
        pending: list[Any] = [node]
        while pending:
            item = pending.pop()
            if isinstance(item, dict):
                target = ref_name(item)
                if target is not None and target != name:
                    referred.add(target)
                pending.extend(item.values())
            elif isinstance(item, list):
                pending.extend(item)
    return tuple(sorted(set(defs) - referred))


def mentions_tasks(defs: dict[str, Any], node: Any, depth: int = 0) -> bool:
    """``node`` (through ``allOf``/``anyOf``/``oneOf`` members and local ``$ref``s, a few
    levels deep) has a member named ``task...`` or a ``method`` const of a task method."""
    if depth > 8 or not isinstance(node, dict):
        return False
    target = ref_name(node)
    if target is not None:
        return mentions_tasks(defs, defs.get(target), depth + 1)
    props = node.get("properties")
    if isinstance(props, dict):
        method = props.get("method")
        const = method.get("const") if isinstance(method, dict) else None
        if any(str(k).startswith("task") for k in props) or (
            isinstance(const, str) and const.startswith(EXT_METHOD_PREFIXES)
        ):
            return True
    return any(
        mentions_tasks(defs, member, depth + 1)
        for key in ("allOf", "anyOf", "oneOf")
        for member in node.get(key) or ()
    )


def _check_refs(f: Finder) -> None:
    """Every ``$ref`` names a definition (the steps below look through them)."""
    pending: list[Any] = [f.defs[n] for n in sorted(f.defs)]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith(f.prefix):
                if ref[len(f.prefix) :] not in f.defs:
                    raise GeneratorError(
                        f"broken $ref {ref!r}: no definition {ref[len(f.prefix) :]!r}"
                    )
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)


def _no_task(f: Finder) -> str:
    return (
        f"{f.loaded.path}: no task definition found (an object with taskId, status and "
        "createdAt whose status refers to an enum of statuses)"
    )


def _task_base(f: Finder) -> tuple[str, str, tuple[str, ...]]:
    """(task definition, status definition, statuses): the one task shape with the enum."""
    bases = []
    for name in sorted(f.defs):
        props = f.defs[name].get("properties") if isinstance(f.defs[name], dict) else None
        if isinstance(props, dict) and TASK_SHAPE <= set(props) and "method" not in props:
            status = props["status"]
            if ref_name(status) and _consts(f.defs, status):
                bases.append((name, str(ref_name(status))))
    if not bases:
        raise GeneratorError(_no_task(f))
    if len(bases) != 1:
        raise GeneratorError(
            "expected exactly one task definition ({taskId, status, createdAt} with a status "
            f"enum); found {[b[0] for b in bases]}"
        )
    task, status = bases[0]
    return task, status, _consts(f.defs, f.defs[status]) or ()


def _create_result(f: Finder, task: str, result_type: str) -> str:
    """The definition that is the task plus ``resultType: <result_type>`` (X-RT-1)."""
    found = []
    for name in sorted(f.defs):
        parts = f.defs[name].get("allOf") if isinstance(f.defs[name], dict) else None
        if not isinstance(parts, list) or not any(ref_name(p) == task for p in parts):
            continue
        for part in parts:
            rt = (
                (part.get("properties") or {}).get("resultType") if isinstance(part, dict) else None
            )
            if isinstance(rt, dict) and "const" in rt:
                if rt["const"] != result_type:
                    raise GeneratorError(
                        f"{name}.resultType is {rt['const']!r}, but the rules overlay says a "
                        f"created task is answered with resultType {result_type!r} (X-RT-1)"
                    )
                found.append(name)
    if len(found) != 1:
        raise GeneratorError(
            f"expected exactly one result that is the task with a resultType const; found {found}"
        )
    return found[0]


def _methods(f: Finder) -> tuple[FoundMethod, ...]:
    out = []
    for name in sorted(f.defs):
        method = f.method_of(f.defs[name])
        if method is None or not method.startswith(EXT_METHOD_PREFIXES):
            continue
        props = f.defs[name]["properties"]
        is_request = "id" in props
        result = None
        if is_request:
            result = name[: -len("Request")] + "Result" if name.endswith("Request") else None
            if result is None or result not in f.defs:
                raise GeneratorError(
                    f"request {name!r} ({method}) has no matching result definition {result!r}"
                )
        out.append(
            FoundMethod(
                method=method,
                definition=name,
                kind="request" if is_request else "notification",
                params=ref_name(props.get("params")),
                result=result,
                # no ClientRequest/ServerRequest unions here: the server sends the
                # notification (X-NOTIF-1), the client the requests (X-SCOPE-3: no
                # client-hosted tasks)
                sent_by=("server",) if method.startswith("notifications/") else ("client",),
            )
        )
    if not out:
        raise GeneratorError(f"{f.loaded.path}: no task methods found (method consts under tasks/)")
    return tuple(out)


def variant_unions(defs: dict[str, Any]) -> tuple[tuple[str, tuple[tuple[str, str], ...]], ...]:
    """(union definition, ((status, variant), ...)) of every union discriminated on
    ``status`` (the reshape pre-pass marks them with a ``discriminator``), by name."""
    out = []
    for name in sorted(defs):
        node = defs[name]
        disc = node.get("discriminator") if isinstance(node, dict) else None
        mapping = disc.get("mapping") if isinstance(disc, dict) else None
        if not isinstance(mapping, dict) or disc.get("propertyName") != "status":  # type: ignore[union-attr]
            continue
        pairs = tuple(
            (str(status), str(ref).rsplit("/", 1)[-1])
            for status, ref in mapping.items()
            if isinstance(ref, str)
        )
        out.append((name, pairs))
    return tuple(out)


def select_extension(loaded: LoadedSchema, overlay: Overlay) -> Selection:
    """The extension's task definitions and their closure (``loaded`` is reshaped)."""
    assert overlay.extension is not None
    ext = overlay.extension
    f = Finder(loaded)
    description = str(loaded.document.get("description", ""))
    # X-ID-1: the extension's own schema names it; rules the schema was not recognised by
    # (its shape's, the user's) cannot cross-check that (a revision may fold it into core)
    if loaded.own_rules and ext.id not in description:
        raise GeneratorError(
            f"{loaded.path} does not name the extension {ext.id!r} of its rules overlay "
            f"({overlay.face}) in its description (X-ID-1)"
        )
    _check_refs(f)
    task, status, statuses = _task_base(f)
    create = _create_result(f, task, ext.result_type_task)
    methods = _methods(f)
    seeds = {task, status, create, ext.capability_def, ext.notification_filter_def}
    seeds |= {u for u, _ in variant_unions(f.defs)}  # the unions no method names
    raw = loaded.document.get("$defs", loaded.document.get("definitions")) or {}
    seeds |= {  # and the rest
        n
        for n in own_definitions(loaded.document)
        if n in f.defs and (loaded.own_rules or mentions_tasks(raw, raw[n]))
    }
    for m in methods:
        seeds |= {m.definition} | ({m.result} if m.result else set())
    missing = sorted(s for s in seeds if s not in f.defs)
    if missing:
        raise GeneratorError(
            f"rules overlay for {overlay.face} names definition {missing[0]!r}, which the schema lacks"
        )
    filter_props = f.defs[ext.notification_filter_def].get("properties") or {}
    if ext.notification_filter not in filter_props:
        raise GeneratorError(
            f"{ext.notification_filter_def} has no {ext.notification_filter!r} (X-NOTIF-2)"
        )
    closure = cut(f, seeds, CapabilityTree({}, {}, {}, {}))
    return Selection(
        defs=closure.defs,
        methods=tuple(replace(m, params=m.params) for m in methods),
        # The request a server may answer with a task (X-CAP-4, X-CAP-7: ``tools/call``
        # only): the overlay's ``[tool_task_support].method``; no ``task`` param (X-CREATE-5).
        augmentable=(
            FoundAugmentable(
                method=overlay.tool_task_support.method,
                definition="",
                receiver="server",
                sent_by=("client",),
                capability_path=(),
            ),
        ),
        capabilities={},
        capability_requests={},
        capability_flags={},
        task_def=task,
        status_def=status,
        statuses=statuses,
        task_metadata_def="",
        create_result_def=create,
        task_support_def=None,
        task_support_values=tuple(
            dict.fromkeys((overlay.tool_task_support.default, *overlay.tool_task_support.may))
        ),
        hoisted=closure.hoisted,
    )
