"""select: find the task definitions by structure and cut their transitive closure.

Nothing here relies on a hard-coded list of definition names. What is found:

- task methods: definitions whose ``method`` const starts with ``tasks/`` or
  ``notifications/tasks/``, with their params and (for requests) results;
- the task metadata type: whatever a request's ``params.task`` refers to;
- task-augmentable requests: requests whose params (through ``$ref``,
  ``anyOf``, ``oneOf``, ``allOf``) carry that ``task`` property;
- the task type: what ``CreateTaskResult``-like results carry in ``task``
  (an object with ``taskId`` and ``status``) and its status enum;
- capability paths: ``*Capabilities.tasks.requests.<category>.<method>``;
- tool-level support: any definition with a ``taskSupport`` enum property.

Inline objects and enums inside the closure are hoisted into named definitions
(``GetTaskRequestParams``, ``TaskSupport``) before anything is rendered, so
class names never depend on the order of ``$defs``.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, replace
from typing import Any

from mcptask_gen.errors import GeneratorError
from mcptask_gen.load import LoadedSchema, known_revisions
from mcptask_gen.wellformed import check_shapes as _check_shapes

TASK_METHOD_PREFIXES = ("tasks/", "notifications/tasks/")
#: The params member of a task-augmented request (its type is the task metadata).
TASK_PROPERTY = "task"
#: The property of a tool's execution settings that declares its task support.
TASK_SUPPORT_PROPERTY = "taskSupport"


@dataclass(frozen=True)
class FoundMethod:
    method: str
    definition: str
    kind: str  # "request" | "notification"
    params: str | None  # None until inline params are hoisted (then None: the method has none)
    result: str | None
    sent_by: tuple[str, ...]


@dataclass(frozen=True)
class FoundAugmentable:
    method: str
    definition: str
    receiver: str  # "server" | "client"
    sent_by: tuple[str, ...]
    capability_path: tuple[str, ...]


@dataclass(frozen=True)
class TaskTypes:
    """The task's own definitions, found by structure."""

    task_metadata_def: str  # what task-augmented params carry in ``task``
    augmentable: tuple[tuple[str, str], ...]  # (definition, method) of augmentable requests
    params_defs: frozenset[str]  # the params definitions of requests (and their members)
    create_result_def: str  # the result carrying the task object in ``task``
    task_def: str
    status_def: str
    statuses: tuple[str, ...]


@dataclass(frozen=True)
class CapabilityTree:
    """Each side's ``*Capabilities.tasks`` object."""

    owners: dict[str, str]  # side -> capability definition (``ServerCapabilities``)
    schemas: dict[str, dict[str, Any]]  # side -> its ``tasks`` schema
    requests: dict[str, tuple[tuple[str, ...], ...]]  # side -> request paths
    flags: dict[str, tuple[str, ...]]  # side -> other members of ``tasks`` (list, cancel)


@dataclass(frozen=True)
class Closure:
    """The cut: the closure of the seeds, inline objects hoisted, ordered by name."""

    defs: dict[str, Any]
    hoisted: dict[str, str]  # "Parent.prop" -> hoisted definition name
    capabilities: dict[str, str]  # side -> hoisted def name of its ``tasks`` capability


@dataclass(frozen=True)
class Selection:
    defs: dict[str, Any]  # the closure, hoisted, ordered by name
    methods: tuple[FoundMethod, ...]
    augmentable: tuple[FoundAugmentable, ...]
    capabilities: dict[str, str]  # side -> hoisted def name of its `tasks` capability
    capability_requests: dict[str, tuple[tuple[str, ...], ...]]  # side -> request paths
    capability_flags: dict[str, tuple[str, ...]]  # side -> other members of `tasks`
    task_def: str
    status_def: str
    statuses: tuple[str, ...]
    task_metadata_def: str
    create_result_def: str
    task_support_def: str | None
    task_support_values: tuple[str, ...]
    hoisted: dict[str, str]  # "Parent.prop" -> name


def ref_name(node: Any) -> str | None:
    """The definition a local ``$ref`` node names (``#/$defs/Task`` -> ``Task``), else None."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/"):
            return ref.rsplit("/", 1)[-1]
    return None


def _alias_cycle(defs: dict[str, Any], start: str) -> list[str] | None:
    """The names of a cycle of definitions that are nothing but a ``$ref`` to the next."""
    chain = [start]
    name = start
    while True:
        node = defs.get(name)
        if not isinstance(node, dict) or not set(node) <= {"$ref", "description", "title"}:
            return None
        nxt = ref_name(node)
        if nxt is None:
            return None
        if nxt in chain:
            return [*chain[chain.index(nxt) :], nxt]
        chain.append(nxt)
        name = nxt


def _pascal(name: str) -> str:
    parts = re.split(r"[^0-9A-Za-z]+", name)
    out = "".join(p[:1].upper() + p[1:] for p in parts if p)
    return out or "Field"


class Finder:
    """Looks through one schema's definitions by structure (shared with ``extselect``)."""

    def __init__(self, loaded: LoadedSchema) -> None:
        self.loaded = loaded
        self.defs = loaded.defs
        self.prefix = f"#/{loaded.defs_key}/"

    def resolve(self, node: Any, seen: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
        """The object schemas a node stands for, through $ref and anyOf/oneOf/allOf."""
        if not isinstance(node, dict):
            return []
        name = ref_name(node)
        if name is not None:
            if name in seen:
                raise GeneratorError(f"schema has a reference cycle through definition {name!r}")
            target = self.defs.get(name)
            if target is None:
                raise GeneratorError(f"broken $ref {node['$ref']!r}: no definition {name!r}")
            return self.resolve(target, seen | {name})
        out: list[dict[str, Any]] = []
        if isinstance(node.get("properties"), dict):
            out.append(node)
        for key in ("anyOf", "oneOf", "allOf"):
            members = node.get(key)
            if isinstance(members, list):
                for member in members:
                    out.extend(self.resolve(member, seen))
        return out

    def method_of(self, definition: Any) -> str | None:
        if not isinstance(definition, dict):
            return None
        props = definition.get("properties")
        if not isinstance(props, dict):
            return None
        method = props.get("method")
        if isinstance(method, dict) and isinstance(method.get("const"), str):
            return str(method["const"])
        return None

    def senders(self) -> dict[str, set[str]]:
        """Definition name -> sides whose request/notification unions list it."""
        out: dict[str, set[str]] = {}
        for name, definition in self.defs.items():
            if not isinstance(definition, dict) or not isinstance(definition.get("anyOf"), list):
                continue
            side = _side(name)
            if side is None or not (name.endswith("Request") or name.endswith("Notification")):
                continue
            for member in definition["anyOf"]:
                ref = ref_name(member)
                if ref is not None:
                    out.setdefault(ref, set()).add(side)
        return out


def no_tasks_message(loaded: LoadedSchema) -> str:
    for rev in known_revisions():
        if rev["id"] == loaded.revision and rev.get("no_tasks"):
            return f"{loaded.path}: {rev['no_tasks']}"
    return (
        f"{loaded.path}: no task definitions found (no 'tasks/*' methods and no request "
        f"params with a 'task' property); MCP tasks arrived in protocol revision 2025-11-25"
    )


def _side(name: str) -> str | None:
    return (
        "client" if name.startswith("Client") else "server" if name.startswith("Server") else None
    )


@dataclass(frozen=True)
class _Scan:
    """One look at every method definition: what the task detection and the task types need."""

    task_meta_defs: frozenset[str]  # what request params carry in ``task``
    augmentable: tuple[tuple[str, str], ...]  # (definition, method) of requests with it
    params_defs: frozenset[str]  # the params definitions of requests (and their members)
    task_methods: bool  # some method const is a task method


def scan_tasks(f: Finder) -> _Scan:
    defs = f.defs
    task_meta_defs: set[str] = set()
    augmentable: list[tuple[str, str]] = []
    params_defs: set[str] = set()
    task_methods = False
    for name in sorted(defs):
        method = f.method_of(defs[name])
        if method is None:
            continue
        task_methods = task_methods or method.startswith(TASK_METHOD_PREFIXES)
        params = defs[name]["properties"].get("params")
        pref = ref_name(params)
        if pref:
            params_defs.add(pref)
            members = defs.get(pref, {})
            if isinstance(members, dict):
                for m in members.get("anyOf", []) + members.get("oneOf", []):
                    if ref_name(m):
                        params_defs.add(str(ref_name(m)))
        targets = {ref_name(obj["properties"].get(TASK_PROPERTY)) for obj in f.resolve(params)}
        targets.discard(None)
        task_meta_defs |= {str(t) for t in targets}
        if targets:
            augmentable.append((name, method))
    return _Scan(frozenset(task_meta_defs), tuple(augmentable), frozenset(params_defs), task_methods)


def _without_tasks(f: Finder, scan: _Scan) -> str | None:
    """Why the schema cannot be generated for lack of tasks (naming where its revision moved
    them), or None: it has task methods or task-augmentable requests."""
    if scan.augmentable or scan.task_methods:
        return None
    return no_tasks_message(f.loaded)


def _augmentation(f: Finder) -> tuple[str, tuple[tuple[str, str], ...], frozenset[str]]:
    """The task metadata type, the task-augmentable requests (definition, method) and the
    params definitions of every request (with their union members)."""
    scan = scan_tasks(f)
    reason = _without_tasks(f, scan)
    if reason is not None:
        raise GeneratorError(reason)
    if len(scan.task_meta_defs) != 1:
        raise GeneratorError(
            "task-augmentable request params must all refer to one task metadata definition; "
            f"found {sorted(scan.task_meta_defs) or 'none'}"
        )
    plain = tuple((n, m) for n, m in scan.augmentable if not m.startswith(TASK_METHOD_PREFIXES))
    return next(iter(scan.task_meta_defs)), plain, scan.params_defs


def _task_types(f: Finder) -> TaskTypes:
    """The task type: carried in ``task`` by the answer to a task-augmented request."""
    defs = f.defs
    task_metadata_def, augmentable, params_defs = _augmentation(f)
    candidates: list[tuple[str, str]] = []
    for name in sorted(defs):
        d = defs[name]
        if not isinstance(d, dict) or f.method_of(d) is not None:
            continue
        props = d.get("properties")
        if not isinstance(props, dict) or TASK_PROPERTY not in props:
            continue
        target = ref_name(props[TASK_PROPERTY])
        if target is None or target == task_metadata_def:
            continue
        target_objs = f.resolve(props[TASK_PROPERTY])
        if target_objs and {"taskId", "status"} <= set(target_objs[0]["properties"]):
            candidates.append((name, target))
    if len(candidates) != 1:
        raise GeneratorError(
            "expected exactly one result type carrying a task object ({taskId, status}) in 'task'; "
            f"found {[c[0] for c in candidates] or 'none'}"
        )
    create_result_def, task_def = candidates[0]
    status_node = defs[task_def]["properties"].get("status")
    status_def = ref_name(status_node)
    if status_def is not None and status_def not in defs:
        raise GeneratorError(
            f"broken $ref {status_node['$ref']!r} in {task_def}.status: no definition {status_def!r}"
        )
    if (
        status_def is None
        or not isinstance(defs.get(status_def), dict)
        or not isinstance(defs[status_def].get("enum"), list)
    ):
        raise GeneratorError(
            f"task definition {task_def!r} has no 'status' referring to an enum definition"
        )
    return TaskTypes(
        task_metadata_def=task_metadata_def,
        augmentable=augmentable,
        params_defs=params_defs,
        create_result_def=create_result_def,
        task_def=task_def,
        status_def=status_def,
        statuses=tuple(str(s) for s in defs[status_def]["enum"]),
    )


def _task_methods(f: Finder, senders: dict[str, set[str]]) -> tuple[FoundMethod, ...]:
    """Definitions whose ``method`` const is a task method, with their params and results."""
    methods: list[FoundMethod] = []
    for name in sorted(f.defs):
        method = f.method_of(f.defs[name])
        if method is None or not method.startswith(TASK_METHOD_PREFIXES):
            continue
        d = f.defs[name]
        props = d["properties"]
        is_request = "id" in props or "id" in d.get("required", [])
        result: str | None = None
        if is_request:
            guess = name[: -len("Request")] + "Result" if name.endswith("Request") else None
            if guess is None or guess not in f.defs:
                raise GeneratorError(
                    f"request {name!r} ({method}) has no matching result definition {guess!r}"
                )
            result = guess
        methods.append(
            FoundMethod(
                method=method,
                definition=name,
                kind="request" if is_request else "notification",
                params=ref_name(props.get("params")),  # inline params: named when hoisted
                result=result,
                sent_by=tuple(sorted(senders.get(name, set()))),
            )
        )
    return tuple(methods)


def _capability_tree(f: Finder) -> CapabilityTree:
    """``*Capabilities.tasks``: the request paths and flags each side may declare."""
    owners: dict[str, str] = {}
    schemas: dict[str, dict[str, Any]] = {}
    for name in sorted(f.defs):
        d = f.defs[name]
        if not name.endswith("Capabilities") or not isinstance(d, dict):
            continue
        tasks = (d.get("properties") or {}).get("tasks")
        side = _side(name)
        if side and isinstance(tasks, dict):
            owners[side], schemas[side] = name, tasks
    requests: dict[str, tuple[tuple[str, ...], ...]] = {}
    flags: dict[str, tuple[str, ...]] = {}
    for side, schema in schemas.items():
        props = schema.get("properties") or {}
        flags[side] = tuple(sorted(k for k in props if k != "requests"))
        tree = (props.get("requests") or {}).get("properties") or {}
        requests[side] = tuple(
            (category, leaf)
            for category in sorted(tree)
            for leaf in sorted((tree[category] or {}).get("properties") or {})
        )
    return CapabilityTree(owners=owners, schemas=schemas, requests=requests, flags=flags)


def _augmentable(
    types: TaskTypes, caps: CapabilityTree, senders: dict[str, set[str]]
) -> tuple[FoundAugmentable, ...]:
    """Each task-augmentable request once per side that may receive it and declare it."""
    out: list[FoundAugmentable] = []
    for name, method in types.augmentable:
        sent_by = tuple(sorted(senders.get(name, set())))
        for receiver in sorted({"server" if s == "client" else "client" for s in sent_by}):
            path = tuple(method.split("/"))
            if path in caps.requests.get(receiver, ()):
                out.append(FoundAugmentable(method, name, receiver, sent_by, path))
    return tuple(out)


def _tool_support(f: Finder) -> tuple[str | None, tuple[str, ...]]:
    """Tool-level negotiation: the definition with a ``taskSupport`` enum property, its values."""
    owner: str | None = None
    values: tuple[str, ...] = ()
    for name in sorted(f.defs):
        d = f.defs[name]
        props = d.get("properties") if isinstance(d, dict) else None
        if isinstance(props, dict) and isinstance(props.get(TASK_SUPPORT_PROPERTY), dict):
            ts = props[TASK_SUPPORT_PROPERTY]
            resolved = f.defs.get(ref_name(ts) or "", ts)
            enum = resolved.get("enum") if isinstance(resolved, dict) else None
            values = tuple(str(v) for v in enum) if isinstance(enum, list) else ()
            owner = name
    return owner, values


def _seeds(
    f: Finder,
    types: TaskTypes,
    methods: tuple[FoundMethod, ...],
    support_owner: str | None,
    extra: tuple[str, ...],
) -> set[str]:
    """The definitions the closure starts from."""
    seeds = {types.task_def, types.status_def, types.task_metadata_def, types.create_result_def}
    for m in methods:
        seeds.add(m.definition)
        if m.result:
            seeds.add(m.result)
    if support_owner:
        seeds.add(support_owner)
    # Other non-request definitions with the task property (the common params mixin).
    for name in sorted(f.defs):
        d = f.defs[name]
        if name in types.params_defs or not isinstance(d, dict) or f.method_of(d) is not None:
            continue
        props = d.get("properties")
        if (
            isinstance(props, dict)
            and ref_name(props.get(TASK_PROPERTY)) == types.task_metadata_def
        ):
            seeds.add(name)
    for name in extra:
        if name not in f.defs:
            raise GeneratorError(
                f"rules overlay for {f.loaded.revision} names definition {name!r}, which the schema lacks"
            )
        seeds.add(name)
    return seeds


def select(loaded: LoadedSchema, extra: tuple[str, ...] = ()) -> Selection:
    """``extra``: definitions the rules overlay names (the types of task ``_meta`` entries)."""
    f = Finder(loaded)
    senders = f.senders()
    types = _task_types(f)
    methods = _task_methods(f, senders)
    caps = _capability_tree(f)
    support_owner, support_values = _tool_support(f)
    closure = cut(f, _seeds(f, types, methods, support_owner, extra), caps)
    support_def = closure.hoisted.get(f"{support_owner}.{TASK_SUPPORT_PROPERTY}")
    if support_owner and support_def is None:
        support_def = ref_name(closure.defs[support_owner]["properties"][TASK_SUPPORT_PROPERTY])
    return Selection(
        defs=closure.defs,
        methods=tuple(
            replace(m, params=m.params or closure.hoisted.get(f"{m.definition}.params"))
            for m in methods
        ),
        augmentable=_augmentable(types, caps, senders),
        capabilities=closure.capabilities,
        capability_requests=caps.requests,
        capability_flags=caps.flags,
        task_def=types.task_def,
        status_def=types.status_def,
        statuses=types.statuses,
        task_metadata_def=types.task_metadata_def,
        create_result_def=types.create_result_def,
        task_support_def=support_def,
        task_support_values=support_values,
        hoisted=closure.hoisted,
    )


def _gather(f: Finder, seeds: set[str], caps: CapabilityTree) -> dict[str, Any]:
    """Copies of the seeds, the ``tasks`` capability objects and everything they refer to."""
    out: dict[str, Any] = {
        f"{caps.owners[side]}Tasks": copy.deepcopy(caps.schemas[side])
        for side in sorted(caps.owners)
    }
    pending = sorted(seeds)

    def visit_refs(node: Any) -> None:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str):
                name = ref_name(node)
                if name is None or not ref.startswith(f.prefix):
                    raise GeneratorError(
                        f"unsupported $ref {ref!r}: only local '{f.prefix}...' references are supported"
                    )
                if name not in f.defs:
                    raise GeneratorError(f"broken $ref {ref!r}: no definition {name!r}")
                if name not in out and name not in pending:
                    pending.append(name)
            for value in node.values():
                visit_refs(value)
        elif isinstance(node, list):
            for value in node:
                visit_refs(value)

    for name in list(out):
        visit_refs(out[name])
    while pending:
        name = pending.pop(0)
        if name not in out:
            out[name] = copy.deepcopy(f.defs[name])
            visit_refs(out[name])
    for name in sorted(out):
        _check_shapes(out[name], f"{f.prefix}{name}")
    for name in sorted(out):
        cycle = _alias_cycle(out, name)
        if cycle is not None:
            raise GeneratorError(
                f"$ref cycle: {' -> '.join(cycle)} (definitions that only refer to each other)"
            )
    return out


def _hoist(out: dict[str, Any], taken: set[str]) -> dict[str, str]:
    """Hoist inline objects and enums of ``out`` into named definitions, in name order (in
    place); returns "Parent.prop" -> the new name. An enum takes its property's name when
    that is unique and free, else ``ParentProp``."""
    enum_names: dict[str, int] = {}
    for name in sorted(out):
        props = (out[name].get("properties") or {}) if isinstance(out[name], dict) else {}
        for prop, schema in sorted(props.items()):
            if isinstance(schema, dict) and "enum" in schema and "$ref" not in schema:
                enum_names[_pascal(prop)] = enum_names.get(_pascal(prop), 0) + 1
    hoisted: dict[str, str] = {}

    def hoist(parent: str, node: dict[str, Any]) -> None:
        props = node.get("properties")
        if not isinstance(props, dict):
            return
        for prop in sorted(props):
            schema = props[prop]
            if not isinstance(schema, dict) or "$ref" in schema:
                continue
            is_object = isinstance(schema.get("properties"), dict) and bool(schema["properties"])
            is_enum = isinstance(schema.get("enum"), list)
            if not (is_object or is_enum):
                continue
            if is_enum and enum_names.get(_pascal(prop)) == 1 and _pascal(prop) not in taken:
                new = _pascal(prop)
            else:
                new = parent + _pascal(prop)
                while new in taken:
                    new += "Inline"
            taken.add(new)
            desc = schema.get("description")
            props[prop] = {"$ref": f"#/$defs/{new}"} | ({"description": desc} if desc else {})
            out[new] = dict(schema)
            hoisted[f"{parent}.{prop}"] = new
            hoist(new, out[new])

    for name in sorted(out):
        if isinstance(out[name], dict):
            hoist(name, out[name])
    return hoisted


def _rewrite(node: Any) -> Any:
    """References normalised to ``#/$defs/``."""
    if isinstance(node, dict):
        return {
            k: (f"#/$defs/{ref_name(node)}" if k == "$ref" and ref_name(node) else _rewrite(v))
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_rewrite(v) for v in node]
    return node


def cut(f: Finder, seeds: set[str], caps: CapabilityTree) -> Closure:
    """The closure of ``seeds``, hoisted, with references normalised, ordered by name."""
    out = _gather(f, seeds, caps)
    hoisted = _hoist(out, set(f.defs) | set(out))
    for owner in caps.owners.values():
        hoisted[f"{owner}.tasks"] = f"{owner}Tasks"
    return Closure(
        defs={name: _rewrite(out[name]) for name in sorted(out)},
        hoisted=dict(sorted(hoisted.items())),
        capabilities={side: f"{caps.owners[side]}Tasks" for side in sorted(caps.owners)},
    )
