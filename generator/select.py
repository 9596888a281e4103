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
from dataclasses import dataclass, field
from typing import Any

from mcptask_gen.errors import GeneratorError
from mcptask_gen.load import LoadedSchema, known_revisions

TASK_METHOD_PREFIXES = ("tasks/", "notifications/tasks/")


@dataclass
class FoundMethod:
    method: str
    definition: str
    kind: str  # "request" | "notification"
    params: str | None
    result: str | None
    sent_by: tuple[str, ...]


@dataclass
class FoundAugmentable:
    method: str
    definition: str
    receiver: str  # "server" | "client"
    sent_by: tuple[str, ...]
    capability_path: tuple[str, ...]


@dataclass
class Selection:
    defs: dict[str, Any]  # the closure, hoisted, ordered by name
    methods: list[FoundMethod]
    augmentable: list[FoundAugmentable]
    capabilities: dict[str, str]  # side -> hoisted def name of its `tasks` capability
    capability_requests: dict[str, list[tuple[str, ...]]]  # side -> request paths
    capability_flags: dict[str, list[str]]  # side -> other members of `tasks` (list, cancel)
    task_def: str
    status_def: str
    statuses: list[str]
    task_metadata_def: str
    create_result_def: str
    task_support_def: str | None
    task_support_values: list[str]
    hoisted: dict[str, str] = field(default_factory=dict)  # "Parent.prop" -> name


def _ref_name(node: Any) -> str | None:
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
        nxt = _ref_name(node)
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


class _Finder:
    def __init__(self, loaded: LoadedSchema) -> None:
        self.loaded = loaded
        self.defs = loaded.defs
        self.prefix = f"#/{loaded.defs_key}/"

    def resolve(self, node: Any, seen: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
        """The object schemas a node stands for, through $ref and anyOf/oneOf/allOf."""
        if not isinstance(node, dict):
            return []
        name = _ref_name(node)
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
            side = (
                "client"
                if name.startswith("Client")
                else "server" if name.startswith("Server") else None
            )
            if side is None or not (name.endswith("Request") or name.endswith("Notification")):
                continue
            for member in definition["anyOf"]:
                ref = _ref_name(member)
                if ref is not None:
                    out.setdefault(ref, set()).add(side)
        return out


def _no_tasks_message(loaded: LoadedSchema) -> str:
    for rev in known_revisions():
        if rev["id"] == loaded.revision and rev.get("no_tasks"):
            return f"{loaded.path}: {rev['no_tasks']}"
    return (
        f"{loaded.path}: no task definitions found (no 'tasks/*' methods and no request "
        f"params with a 'task' property); MCP tasks arrived in protocol revision 2025-11-25"
    )


def select(loaded: LoadedSchema, extra: tuple[str, ...] = ()) -> Selection:
    """``extra``: definitions the rules overlay names (the types of task ``_meta`` entries)."""
    f = _Finder(loaded)
    defs = f.defs
    senders = f.senders()

    # Task-augmentable requests and the task metadata type.
    task_meta_defs: set[str] = set()
    augmentable_defs: list[tuple[str, str]] = []
    params_defs_of_requests: set[str] = set()
    for name in sorted(defs):
        method = f.method_of(defs[name])
        if method is None:
            continue
        params = defs[name]["properties"].get("params")
        pref = _ref_name(params)
        if pref:
            params_defs_of_requests.add(pref)
            members = defs.get(pref, {})
            if isinstance(members, dict):
                for m in members.get("anyOf", []) + members.get("oneOf", []):
                    if _ref_name(m):
                        params_defs_of_requests.add(str(_ref_name(m)))
        found = False
        for obj in f.resolve(params):
            task_prop = obj["properties"].get("task")
            target = _ref_name(task_prop)
            if target is not None:
                task_meta_defs.add(target)
                found = True
        if found:
            augmentable_defs.append((name, method))

    task_methods = [
        (name, f.method_of(defs[name]))
        for name in sorted(defs)
        if (f.method_of(defs[name]) or "").startswith(TASK_METHOD_PREFIXES)
    ]
    if not task_methods and not augmentable_defs:
        raise GeneratorError(_no_tasks_message(loaded))
    if len(task_meta_defs) != 1:
        raise GeneratorError(
            "task-augmentable request params must all refer to one task metadata definition; "
            f"found {sorted(task_meta_defs) or 'none'}"
        )
    task_metadata_def = task_meta_defs.pop()
    augmentable_defs = [
        (n, m) for n, m in augmentable_defs if not m.startswith(TASK_METHOD_PREFIXES)
    ]

    # The task type: carried in `task` by the answer to a task-augmented request.
    create_candidates: list[tuple[str, str]] = []
    for name in sorted(defs):
        d = defs[name]
        if not isinstance(d, dict) or f.method_of(d) is not None:
            continue
        props = d.get("properties")
        if not isinstance(props, dict) or "task" not in props:
            continue
        target = _ref_name(props["task"])
        if target is None or target == task_metadata_def:
            continue
        target_objs = f.resolve(props["task"])
        if target_objs and {"taskId", "status"} <= set(target_objs[0]["properties"]):
            create_candidates.append((name, target))
    if len(create_candidates) != 1:
        raise GeneratorError(
            "expected exactly one result type carrying a task object ({taskId, status}) in 'task'; "
            f"found {[c[0] for c in create_candidates] or 'none'}"
        )
    create_result_def, task_def = create_candidates[0]
    status_node = defs[task_def]["properties"].get("status")
    status_def = _ref_name(status_node)
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
    statuses = [str(s) for s in defs[status_def]["enum"]]

    # Task methods.
    methods: list[FoundMethod] = []
    seeds: set[str] = {task_def, status_def, task_metadata_def, create_result_def}
    for name, method in task_methods:
        assert method is not None
        d = defs[name]
        props = d["properties"]
        is_request = "id" in props or "id" in d.get("required", [])
        result: str | None = None
        if is_request:
            guess = name[: -len("Request")] + "Result" if name.endswith("Request") else None
            if guess is None or guess not in defs:
                raise GeneratorError(
                    f"request {name!r} ({method}) has no matching result definition {guess!r}"
                )
            result = guess
            seeds.add(result)
        params = props.get("params")
        pname = _ref_name(params)
        methods.append(
            FoundMethod(
                method=method,
                definition=name,
                kind="request" if is_request else "notification",
                params=pname,  # inline params are named after hoisting, below
                result=result,
                sent_by=tuple(sorted(senders.get(name, set()))),
            )
        )
        seeds.add(name)

    # Capabilities: *Capabilities.tasks
    cap_tasks: dict[str, dict[str, Any]] = {}
    for name in sorted(defs):
        d = defs[name]
        if not name.endswith("Capabilities") or not isinstance(d, dict):
            continue
        tasks = (d.get("properties") or {}).get("tasks")
        side = (
            "client"
            if name.startswith("Client")
            else "server" if name.startswith("Server") else None
        )
        if side and isinstance(tasks, dict):
            cap_tasks[side] = {"def": name, "schema": tasks}
    capability_requests: dict[str, list[tuple[str, ...]]] = {}
    capability_flags: dict[str, list[str]] = {}
    for side, info in cap_tasks.items():
        props = info["schema"].get("properties") or {}
        capability_flags[side] = sorted(k for k in props if k != "requests")
        paths: list[tuple[str, ...]] = []
        requests = (props.get("requests") or {}).get("properties") or {}
        for category in sorted(requests):
            for leaf in sorted((requests[category] or {}).get("properties") or {}):
                paths.append((category, leaf))
        capability_requests[side] = paths

    augmentable: list[FoundAugmentable] = []
    for name, method in augmentable_defs:
        sent_by = tuple(sorted(senders.get(name, set())))
        receivers = sorted({"server" if s == "client" else "client" for s in sent_by})
        for receiver in receivers:
            path = tuple(method.split("/"))
            if path in capability_requests.get(receiver, []):
                augmentable.append(
                    FoundAugmentable(
                        method=method,
                        definition=name,
                        receiver=receiver,
                        sent_by=sent_by,
                        capability_path=path,
                    )
                )

    # Tool-level negotiation: any definition with a `taskSupport` enum property.
    task_support_def: str | None = None
    task_support_values: list[str] = []
    for name in sorted(defs):
        d = defs[name]
        props = d.get("properties") if isinstance(d, dict) else None
        if isinstance(props, dict) and isinstance(props.get("taskSupport"), dict):
            seeds.add(name)
            ts = props["taskSupport"]
            ts_resolved = defs.get(_ref_name(ts) or "", ts)
            enum = ts_resolved.get("enum") if isinstance(ts_resolved, dict) else None
            task_support_values = [str(v) for v in enum] if isinstance(enum, list) else []
            task_support_def = name

    # Other non-request definitions with the task property (the common params mixin).
    for name in sorted(defs):
        d = defs[name]
        if name in params_defs_of_requests or not isinstance(d, dict) or f.method_of(d) is not None:
            continue
        props = d.get("properties")
        if isinstance(props, dict) and _ref_name(props.get("task")) == task_metadata_def:
            seeds.add(name)

    for name in extra:
        if name not in defs:
            raise GeneratorError(
                f"rules overlay for {loaded.revision} names definition {name!r}, which the schema lacks"
            )
        seeds.add(name)

    selection = Selection(
        defs={},
        methods=methods,
        augmentable=augmentable,
        capabilities={},
        capability_requests=capability_requests,
        capability_flags=capability_flags,
        task_def=task_def,
        status_def=status_def,
        statuses=statuses,
        task_metadata_def=task_metadata_def,
        create_result_def=create_result_def,
        task_support_def=None,
        task_support_values=task_support_values,
    )
    return _cut(f, seeds, cap_tasks, selection, task_support_def)


#: Keywords whose value must have one JSON type for the generator to read the schema at all.
_SHAPES: dict[str, tuple[type, str]] = {
    "properties": (dict, "an object"),
    "required": (list, "an array"),
    "enum": (list, "an array"),
    "anyOf": (list, "an array"),
    "oneOf": (list, "an array"),
    "allOf": (list, "an array"),
    "prefixItems": (list, "an array"),
}
#: Keywords whose values are data, not subschemas.
_DATA_KEYWORDS = {"enum", "const", "default", "examples", "required"}


def _check_shapes(node: Any, path: str) -> None:
    """Name the first keyword of a selected definition whose value has the wrong JSON type."""
    if isinstance(node, list):
        for i, item in enumerate(node):
            _check_shapes(item, f"{path}/{i}")
        return
    if not isinstance(node, dict):
        return
    for key, (kind, what) in _SHAPES.items():
        if key in node and not isinstance(node[key], kind):
            raise GeneratorError(f"{path}/{key} must be {what}, not {_json_type(node[key])}")
    for key, value in node.items():
        if key in _DATA_KEYWORDS:
            continue
        if key in ("properties", "patternProperties", "$defs", "definitions"):
            if isinstance(value, dict):
                for prop, sub in value.items():
                    if not isinstance(sub, (dict, bool)):
                        raise GeneratorError(
                            f"{path}/{key}/{prop} must be a schema (an object), "
                            f"not {_json_type(sub)}"
                        )
                    _check_shapes(sub, f"{path}/{key}/{prop}")
            continue
        _check_shapes(value, f"{path}/{key}")


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _cut(
    f: _Finder,
    seeds: set[str],
    cap_tasks: dict[str, dict[str, Any]],
    selection: Selection,
    task_support_owner: str | None,
) -> Selection:
    defs = f.defs
    out: dict[str, Any] = {}
    pending = sorted(seeds)
    for side, info in sorted(cap_tasks.items()):
        name = f"{info['def']}Tasks"
        out[name] = copy.deepcopy(info["schema"])
        selection.capabilities[side] = name
        selection.hoisted[f"{info['def']}.tasks"] = name

    def visit_refs(node: Any) -> None:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str):
                name = _ref_name(node)
                if name is None or not ref.startswith(f.prefix):
                    raise GeneratorError(
                        f"unsupported $ref {ref!r}: only local '{f.prefix}...' references are supported"
                    )
                if name not in defs:
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
        if name in out:
            continue
        out[name] = copy.deepcopy(defs[name])
        visit_refs(out[name])
    for name in sorted(out):
        _check_shapes(out[name], f"{f.prefix}{name}")
    for name in sorted(out):
        cycle = _alias_cycle(out, name)
        if cycle is not None:
            raise GeneratorError(
                f"$ref cycle: {' -> '.join(cycle)} (definitions that only refer to each other)"
            )

    # Hoist inline objects and enums into named definitions, in name order.
    taken = set(defs) | set(out)
    enum_names: dict[str, int] = {}
    for name in sorted(out):
        for prop, schema in sorted(
            ((out[name].get("properties") or {}) if isinstance(out[name], dict) else {}).items()
        ):
            if isinstance(schema, dict) and "enum" in schema and "$ref" not in schema:
                enum_names[_pascal(prop)] = enum_names.get(_pascal(prop), 0) + 1

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
            hoisted = dict(schema)
            desc = hoisted.get("description")
            props[prop] = {"$ref": f"#/$defs/{new}"} | ({"description": desc} if desc else {})
            out[new] = hoisted
            selection.hoisted[f"{parent}.{prop}"] = new
            if prop == "taskSupport":
                selection.task_support_def = new
            hoist(new, hoisted)

    for name in sorted(out):
        if isinstance(out[name], dict):
            hoist(name, out[name])
    if task_support_owner and selection.task_support_def is None:
        ts = out[task_support_owner]["properties"]["taskSupport"]
        selection.task_support_def = _ref_name(ts)

    # Normalise references to `#/$defs/` and order definitions by name.
    def rewrite(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                k: (f"#/$defs/{_ref_name(node)}" if k == "$ref" and _ref_name(node) else rewrite(v))
                for k, v in node.items()
            }
        if isinstance(node, list):
            return [rewrite(v) for v in node]
        return node

    selection.defs = {name: rewrite(out[name]) for name in sorted(out)}
    for m in selection.methods:
        if m.params is None:
            hoisted_name = selection.hoisted.get(f"{m.definition}.params")
            m.params = hoisted_name
    return selection
