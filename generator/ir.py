"""IR: the small typed model the templates see, built from a Selection and the rules overlay."""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass
from typing import Any

from mcptask_gen.errors import GeneratorError
from mcptask_gen.load import LoadedSchema
from mcptask_gen.select import Selection


def snake(name: str) -> str:
    s = re.sub(r"[^0-9A-Za-z]+", "_", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s).lower().strip("_")
    if not s or s[0].isdigit() or keyword.iskeyword(s):
        s = f"m_{s}"
    return s


@dataclass(frozen=True)
class MethodIR:
    method: str
    kind: str  # request | notification
    request_model: str
    params_model: str | None
    result_model: str | None
    sent_by: tuple[str, ...]
    handler: str  # python method name on the handler base


@dataclass(frozen=True)
class AugmentableIR:
    method: str
    request_model: str
    receiver: str
    sent_by: tuple[str, ...]
    capability_path: tuple[str, ...]
    hook: str


@dataclass(frozen=True)
class ErrorIR:
    name: str
    base: str
    code: int
    message: str
    fields: tuple[str, ...]
    rule: str


@dataclass(frozen=True)
class MetaKeyIR:
    key: str
    name: str
    type: str
    model: str | None
    rule: str


@dataclass(frozen=True)
class IR:
    generator_version: str
    schema_name: str
    schema_sha256: str
    revision: str
    package: str
    methods: tuple[MethodIR, ...]
    augmentable: tuple[AugmentableIR, ...]
    statuses: tuple[str, ...]
    initial: str
    terminal: tuple[str, ...]
    transitions: tuple[tuple[str, tuple[str, ...]], ...]
    status_names: dict[str, str]  # role (working, failed...) -> status value
    errors: tuple[ErrorIR, ...]
    meta_keys: tuple[MetaKeyIR, ...]
    capability_models: dict[str, str]
    capability_requests: dict[str, tuple[str, ...]]  # side -> ("tools/call", ...)
    capability_flags: dict[str, tuple[str, ...]]
    task_model: str
    status_model: str
    task_metadata_model: str
    create_result_model: str
    task_support_model: str | None
    task_support_values: tuple[str, ...]
    model_names: tuple[str, ...]
    #: Stable Python names of the methods the runtime uses: CONSTANT -> method.
    method_constants: tuple[tuple[str, str], ...] = ()
    #: Stable role names of models (overlay ``[roles]``): alias -> model class name.
    model_roles: tuple[tuple[str, str], ...] = ()
    #: Every request method of the schema's ``ServerRequest`` union (sent by a server).
    server_request_methods: tuple[str, ...] = ()
    #: The task's ``ttl`` admits ``null`` (unlimited retention).
    ttl_nullable: bool = False
    #: ``taskSupport`` when a tool declares none (R-TOOL-2).
    task_support_default: str = "forbidden"


def constant_name(method: str) -> str:
    """``tasks/get`` -> ``TASKS_GET``; ``sampling/createMessage`` -> ``SAMPLING_CREATE_MESSAGE``."""
    return snake(method.replace("/", "_")).upper()


def _union_methods(loaded: LoadedSchema, union: str) -> tuple[str, ...]:
    """The ``method`` consts of the members of a request union such as ``ServerRequest``."""
    node = loaded.defs.get(union)
    members = node.get("anyOf") or node.get("oneOf") if isinstance(node, dict) else None
    found: set[str] = set()
    for member in members if isinstance(members, list) else ():
        ref = member.get("$ref") if isinstance(member, dict) else None
        target = loaded.defs.get(ref.rsplit("/", 1)[-1]) if isinstance(ref, str) else None
        props = target.get("properties") if isinstance(target, dict) else None
        method = props.get("method") if isinstance(props, dict) else None
        const = method.get("const") if isinstance(method, dict) else None
        if isinstance(const, str):
            found.add(const)
    return tuple(sorted(found))


def _ttl_nullable(sel: Selection) -> bool:
    props = sel.defs.get(sel.task_def, {}).get("properties", {})
    ttl = props.get("ttl") if isinstance(props, dict) else None
    if not isinstance(ttl, dict):
        return False
    types = ttl.get("type")
    if types == "null" or (isinstance(types, list) and "null" in types):
        return True
    options = ttl.get("anyOf") or ttl.get("oneOf") or ()
    return any(isinstance(o, dict) and o.get("type") == "null" for o in options)


def _model_roles(
    overlay: dict[str, Any], sel: Selection, methods: tuple[MethodIR, ...], revision: str
) -> tuple[tuple[str, str], ...]:
    by_method = {m.method: m for m in methods}
    roles: dict[str, str] = {
        "Task": sel.task_def,
        "TaskStatus": sel.status_def,
        "TaskMetadata": sel.task_metadata_def,
        "CreateTaskResult": sel.create_result_def,
    }
    table = overlay.get("roles", {})
    if not isinstance(table, dict):
        raise GeneratorError(f"rules overlay for {revision}: [roles] must be a table")
    for method, names in sorted(table.items()):
        m = by_method.get(method)
        if m is None or not isinstance(names, dict):
            raise GeneratorError(
                f"rules overlay for {revision}: [roles] names {method!r}, "
                "which is not a task method of the schema"
            )
        for part, model in (("params", m.params_model), ("result", m.result_model)):
            alias = names.get(part)
            if alias is not None and model is not None:
                roles[str(alias)] = model
    return tuple(sorted(roles.items()))


def build_ir(
    loaded: LoadedSchema, sel: Selection, overlay: dict[str, Any], package: str, version: str
) -> IR:
    life = overlay.get("lifecycle", {})
    statuses = tuple(sel.statuses)
    transitions_raw: dict[str, list[str]] = life.get("transitions", {})
    mentioned = (
        set(transitions_raw)
        | {s for v in transitions_raw.values() for s in v}
        | set(life.get("terminal", []))
    )
    mentioned |= {
        life.get(k)
        for k in ("initial", "working", "input_required", "completed", "failed", "cancelled")
        if life.get(k)
    }
    unknown = sorted(s for s in mentioned if s not in statuses)
    if unknown:
        raise GeneratorError(
            f"rules overlay for {loaded.revision} names statuses the schema's {sel.status_def} lacks: {unknown}"
        )
    missing = sorted(s for s in statuses if s not in transitions_raw)
    if missing:
        raise GeneratorError(
            f"rules overlay for {loaded.revision} gives no transitions for statuses {missing}"
        )
    methods = tuple(
        MethodIR(
            method=m.method,
            kind=m.kind,
            request_model=m.definition,
            params_model=m.params,
            result_model=m.result,
            sent_by=m.sent_by,
            handler=snake(m.method.replace("/", "_")),
        )
        for m in sorted(sel.methods, key=lambda m: m.method)
    )
    augmentable = tuple(
        AugmentableIR(
            method=a.method,
            request_model=a.definition,
            receiver=a.receiver,
            sent_by=a.sent_by,
            capability_path=a.capability_path,
            hook=snake(a.method.replace("/", "_")) + "_task",
        )
        for a in sorted(sel.augmentable, key=lambda a: (a.method, a.receiver))
    )
    names = [m.handler for m in methods] + [a.hook for a in augmentable]
    if len(set(names)) != len(names):
        raise GeneratorError(
            f"method names collide after conversion to Python names: {sorted(names)}"
        )
    errors = []
    for e in overlay.get("errors", []):
        message = str(e["message"])
        fields = tuple(dict.fromkeys(re.findall(r"{(\w+)}", message)))
        errors.append(
            ErrorIR(
                name=str(e["name"]),
                base=str(e.get("base", "TaskError")),
                code=int(e["code"]),
                message=message,
                fields=fields,
                rule=str(e.get("rule", "")),
            )
        )
    meta_keys = []
    for m in overlay.get("meta", []):
        model = m.get("def")
        if model is not None and model not in sel.defs:
            raise GeneratorError(
                f"rules overlay names _meta type {model!r}, which the schema does not define"
            )
        meta_keys.append(
            MetaKeyIR(
                key=str(m["key"]),
                name=str(m["name"]),
                type=str(model or m.get("type", "Any")),
                model=model,
                rule=str(m.get("rule", "")),
            )
        )
    constants = {constant_name(m.method): m.method for m in methods}
    constants.update({constant_name(a.method): a.method for a in augmentable})
    support = overlay.get("tool_task_support", {})
    return IR(
        method_constants=tuple(sorted(constants.items())),
        model_roles=_model_roles(overlay, sel, methods, loaded.revision),
        server_request_methods=_union_methods(loaded, "ServerRequest"),
        ttl_nullable=_ttl_nullable(sel),
        task_support_default=str(support.get("default", "forbidden")),
        generator_version=version,
        schema_name=loaded.path.name,
        schema_sha256=loaded.sha256,
        revision=loaded.revision,
        package=package,
        methods=methods,
        augmentable=augmentable,
        statuses=statuses,
        initial=str(life.get("initial", statuses[0])),
        terminal=tuple(s for s in statuses if s in set(life.get("terminal", []))),
        transitions=tuple(
            (s, tuple(t for t in statuses if t in set(transitions_raw[s]))) for s in statuses
        ),
        status_names={
            k: str(life[k])
            for k in ("working", "input_required", "completed", "failed", "cancelled")
            if k in life
        },
        errors=tuple(errors),
        meta_keys=tuple(meta_keys),
        capability_models=dict(sorted(sel.capabilities.items())),
        capability_requests={
            side: tuple("/".join(p) for p in paths)
            for side, paths in sorted(sel.capability_requests.items())
        },
        capability_flags={side: tuple(v) for side, v in sorted(sel.capability_flags.items())},
        task_model=sel.task_def,
        status_model=sel.status_def,
        task_metadata_model=sel.task_metadata_def,
        create_result_model=sel.create_result_def,
        task_support_model=sel.task_support_def,
        task_support_values=tuple(sel.task_support_values),
        model_names=tuple(sorted(sel.defs)),
    )
