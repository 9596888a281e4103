"""IR: the small typed model the templates see, built from a Selection and the rules overlay.

``build_ir`` makes one schema's IR (a face); ``merge_faces`` makes the package of every face:
ordered by revision, checked (one face per schema, one state machine, one code per error
name), with the package IR the top-level templates see.

Every field carries its documentation (``doc``): ``mcptask-gen --list-template-context``
prints them, so the reference of what a ``--templates`` template may use cannot go stale.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from mcptask_gen.errors import GeneratorError
from mcptask_gen.load import LoadedSchema
from mcptask_gen.overlay import Overlay
from mcptask_gen.select import Selection

_NO_DEFAULT: Any = object()


def doc(text: str, default: Any = _NO_DEFAULT) -> Any:
    """A dataclass field documented with ``text`` (shown by ``--list-template-context``)."""
    if default is _NO_DEFAULT:
        return field(metadata={"doc": text})
    return field(default=default, metadata={"doc": text})


def snake(name: str) -> str:
    s = re.sub(r"[^0-9A-Za-z]+", "_", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s).lower().strip("_")
    if not s or s[0].isdigit() or keyword.iskeyword(s):
        s = f"m_{s}"
    return s


@dataclass(frozen=True)
class _MessageIR:
    """What a task method and a task-augmentable request have in common."""

    method: str = doc("the JSON-RPC method name")
    request_model: str = doc("model class of the whole request (or notification) message")
    sent_by: tuple[str, ...] = doc('the sides that may send it: "client", "server"')


@dataclass(frozen=True)
class MethodIR(_MessageIR):
    """A task method (``tasks/get``, ``notifications/tasks/status``)."""

    kind: str = doc('"request" or "notification"')
    params_model: str | None = doc("model class of its params (None: the schema has none)")
    result_model: str | None = doc("model class of its result (None for notifications)")
    handler: str = doc("Python method name of its handler (``tasks_get``)")


@dataclass(frozen=True)
class AugmentableIR(_MessageIR):
    """A request type one side may receive task-augmented (``tools/call``)."""

    receiver: str = doc('the side that receives it: "client" or "server"')
    capability_path: tuple[str, ...] = doc("its path under ``tasks.requests`` (tools, call)")
    hook: str = doc("Python method name of its handler hook (``tools_call_task``)")


@dataclass(frozen=True)
class ErrorIR:
    """An error type of the rules overlay."""

    name: str = doc("Python class name")
    base: str = doc("its parent class (``TaskError`` or an earlier error)")
    code: int = doc("JSON-RPC error code")
    message: str = doc("message template, with ``{field}`` placeholders")
    fields: tuple[str, ...] = doc("the placeholders of ``message``, in order")
    rule: str = doc("the spec rule it answers (``R-ERR-2``)")
    data: dict[str, Any] | None = doc("its ``data`` when the raiser gives none", None)


@dataclass(frozen=True)
class MetaKeyIR:
    """A task-related ``_meta`` key of the rules overlay."""

    key: str = doc("the key on the wire")
    name: str = doc("Python name (``related_task``)")
    type: str = doc("Python type of its value (a model class name, or a builtin)")
    model: str | None = doc("model class of its value, when the schema defines one")
    rule: str = doc("the spec rule it follows")
    task_id_field: str | None = doc(
        "the member of its value naming the related task (None: the key is not that one)"
    )


@dataclass(frozen=True)
class ToolTaskSupportIR:
    """The tool-level ``taskSupport`` rules of the overlay (R-TOOL-*)."""

    method: str = doc("the request a tool's taskSupport governs (``tools/call``)")
    path: tuple[str, ...] = doc("where a tool declares it (``execution``, ``taskSupport``)")
    default: str = doc("the value of a tool that declares none (R-TOOL-2)")
    may: tuple[str, ...] = doc("values under which a call may be task-augmented (R-TOOL-3)")
    must: tuple[str, ...] = doc("values under which a call must be task-augmented (R-TOOL-4)")
    forbidden_error: str = doc("error class of an augmented call the tool forbids")
    required_error: str = doc("error class of a plain call the tool requires augmented")


@dataclass(frozen=True)
class ExtensionIR:
    """What an extension face knows beyond the schema (overlay ``[extension]``, X-* rules)."""

    id: str = doc("the extension identifier (X-ID-1)")
    result_type_task: str = doc("``resultType`` of a create answer (X-RT-1)")
    result_type_complete: str = doc("``resultType`` of every other answer (X-RT-2)")
    client_meta_key: str = doc("the ``params._meta`` key of the client's capabilities (X-CAP-1)")
    server_capability_path: tuple[str, ...] = doc("where server/discover lists it (X-CAP-2)")
    capability_model: str = doc("model class of the extension's settings (X-CAP-3)")
    gate_methods: tuple[str, ...] = doc("methods answering -32021 without the capability")
    removed_methods: tuple[str, ...] = doc("methods answering -32601 on this face (X-COMPAT-4)")
    routing_name_param: str = doc("the params member the ``Mcp-Name`` header carries (X-HTTP-1)")
    routing_headers: tuple[str, str] = doc("(method header, name header) (X-HTTP-1, X-HTTP-2)")
    missing_capability_error: str = doc("error class of a task-required call without it")
    header_mismatch_error: str = doc("error class of a routing header mismatch (X-HTTP-4)")
    tool_error: str = doc("status of a task whose tool result has ``isError`` (X-ERR-4)")
    notification_channel: str = doc("the request whose stream carries task notifications")
    notification_filter: str = doc("its member listing the task ids (X-NOTIF-2)")
    notification_filter_model: str = doc("model class of that filter")
    detailed_task_model: str | None = doc(
        "the union of the task's status variants themselves (``DetailedTask``), if any"
    )


@dataclass(frozen=True)
class IR:
    """Everything a template sees, as ``ir`` (besides ``header`` and, in ``models.py.jinja``,
    ``models_code``)."""

    generator_version: str = doc("mcptask-gen's version")
    schema_source: str = doc(
        "where the schema came from: the official origin of its bytes "
        "(``owner/repo@commit:path``), else the URL it was fetched from, else its file name"
    )
    schema_sha256: str = doc("sha256 of the schema's canonical JSON")
    revision: str = doc("MCP protocol revision (``2025-11-25``)")
    package: str = doc("import name of the generated package")
    methods: tuple[MethodIR, ...] = doc("the task methods, by name")
    augmentable: tuple[AugmentableIR, ...] = doc("the task-augmentable requests, by name")
    statuses: tuple[str, ...] = doc("task statuses, in schema order")
    initial: str = doc("the status a task starts in (R-STATE-1)")
    terminal: tuple[str, ...] = doc("terminal statuses (R-STATE-3)")
    transitions: tuple[tuple[str, tuple[str, ...]], ...] = doc(
        "(status, the statuses it may move to) for every status (R-STATE-2)"
    )
    status_names: dict[str, str] = doc("status role (working, failed, ...) -> status value")
    errors: tuple[ErrorIR, ...] = doc("error types, each after its base")
    meta_keys: tuple[MetaKeyIR, ...] = doc("task-related ``_meta`` keys")
    capability_models: dict[str, str] = doc("side -> model class of its ``tasks`` capability")
    capability_requests: dict[str, tuple[str, ...]] = doc(
        "side -> the methods it may declare under ``tasks.requests``"
    )
    capability_flags: dict[str, tuple[str, ...]] = doc(
        "side -> the other members of its ``tasks`` capability (list, cancel)"
    )
    task_model: str = doc("model class of a task")
    status_model: str = doc("enum class of task statuses")
    task_metadata_model: str = doc("model class of a request's ``task`` param")
    task_param: str = doc("the params member of a task-augmented request (``task``)")
    create_result_model: str = doc("model class of the answer to a task-augmented request")
    task_support_model: str | None = doc("enum class of a tool's ``taskSupport``")
    task_support_values: tuple[str, ...] = doc("the values of a tool's ``taskSupport``")
    tool_task_support: ToolTaskSupportIR = doc("the tool-level ``taskSupport`` rules")
    model_names: tuple[str, ...] = doc("every model class, by name")
    method_constants: tuple[tuple[str, str], ...] = doc(
        "(CONSTANT, method) of every task and task-augmentable method (``TASKS_GET``)"
    )
    model_roles: tuple[tuple[str, str], ...] = doc(
        "(role name, model class): stable names of models (overlay ``[roles]``)"
    )
    server_request_methods: tuple[str, ...] = doc(
        "every request method of the schema's ``ServerRequest`` union"
    )
    ttl_nullable: bool = doc("the task's ``ttl`` admits ``null`` (unlimited retention)")
    task_support_default: str = doc("``taskSupport`` when a tool declares none (R-TOOL-2)")
    face: str = doc("the subpackage of this schema's bindings (``core``)", "")
    kind: str = doc('"core" (tasks in the protocol) or "extension"', "core")
    extension: ExtensionIR | None = doc("the extension's facts (None for a core face)", None)
    variants: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = doc(
        "(union model, ((status, variant model), ...)) of each status-discriminated union", ()
    )


def python_name(method: str) -> str:
    """``tasks/get`` -> ``tasks_get``: the handler method of a JSON-RPC method."""
    return snake(method.replace("/", "_"))


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
    ttl = (props.get("ttl") or props.get("ttlMs")) if isinstance(props, dict) else None
    if not isinstance(ttl, dict):
        return False
    types = ttl.get("type")
    if types == "null" or (isinstance(types, list) and "null" in types):
        return True
    options = ttl.get("anyOf") or ttl.get("oneOf") or ()
    return any(isinstance(o, dict) and o.get("type") == "null" for o in options)


def _model_roles(
    overlay: Overlay, sel: Selection, methods: tuple[MethodIR, ...]
) -> tuple[tuple[str, str], ...]:
    by_method = {m.method: m for m in methods}
    roles: dict[str, str] = {
        "Task": sel.task_def,
        "TaskStatus": sel.status_def,
        "TaskMetadata": sel.task_metadata_def,
        "CreateTaskResult": sel.create_result_def,
    }
    roles = {role: model for role, model in roles.items() if model}
    for role in overlay.roles:
        m = by_method.get(role.method)
        if m is None:
            raise GeneratorError(
                f"rules overlay for {overlay.revision}: [roles] names {role.method!r}, "
                "which is not a task method of the schema"
            )
        for alias, model in ((role.params, m.params_model), (role.result, m.result_model)):
            if alias is not None and model is not None:
                roles[alias] = model
    return tuple(sorted(roles.items()))


@dataclass(frozen=True)
class _LifecycleIR:
    statuses: tuple[str, ...]
    initial: str
    terminal: tuple[str, ...]
    transitions: tuple[tuple[str, tuple[str, ...]], ...]
    status_names: dict[str, str]


def _lifecycle(overlay: Overlay, sel: Selection) -> _LifecycleIR:
    """The overlay's state machine over the schema's statuses (R-STATE-*)."""
    life = overlay.lifecycle
    statuses = sel.statuses
    moves = dict(life.transitions)
    mentioned = (
        set(moves)
        | {s for targets in moves.values() for s in targets}
        | set(life.terminal)
        | {life.initial}
        | {status for _, status in life.roles}
    )
    unknown = sorted(s for s in mentioned if s not in statuses)
    if unknown:
        raise GeneratorError(
            f"rules overlay for {overlay.revision} names statuses the schema's "
            f"{sel.status_def} lacks: {unknown}"
        )
    missing = sorted(s for s in statuses if s not in moves)
    if missing:
        raise GeneratorError(
            f"rules overlay for {overlay.revision} gives no transitions for statuses {missing}"
        )
    return _LifecycleIR(
        statuses=statuses,
        initial=life.initial,
        terminal=tuple(s for s in statuses if s in set(life.terminal)),
        transitions=tuple((s, tuple(t for t in statuses if t in set(moves[s]))) for s in statuses),
        status_names=dict(life.roles),
    )


def _methods(sel: Selection) -> tuple[tuple[MethodIR, ...], tuple[AugmentableIR, ...]]:
    """Task methods and task-augmentable requests, by name, with their Python names."""
    methods = tuple(
        MethodIR(
            method=m.method,
            request_model=m.definition,
            sent_by=m.sent_by,
            kind=m.kind,
            params_model=m.params,
            result_model=m.result,
            handler=python_name(m.method),
        )
        for m in sorted(sel.methods, key=lambda m: m.method)
    )
    augmentable = tuple(
        AugmentableIR(
            method=a.method,
            request_model=a.definition,
            sent_by=a.sent_by,
            receiver=a.receiver,
            capability_path=a.capability_path,
            hook=python_name(a.method) + "_task",
        )
        for a in sorted(sel.augmentable, key=lambda a: (a.method, a.receiver))
    )
    names = [m.handler for m in methods] + [a.hook for a in augmentable]
    if len(set(names)) != len(names):
        raise GeneratorError(
            f"method names collide after conversion to Python names: {sorted(names)}"
        )
    return methods, augmentable


def _errors(overlay: Overlay) -> tuple[ErrorIR, ...]:
    return tuple(
        ErrorIR(
            name=e.name,
            base=e.base,
            code=e.code,
            message=e.message,
            fields=tuple(dict.fromkeys(re.findall(r"{(\w+)}", e.message))),
            rule=e.rule,
            data=e.data,
        )
        for e in overlay.errors
    )


def _meta_keys(overlay: Overlay, sel: Selection) -> tuple[MetaKeyIR, ...]:
    for m in overlay.meta:
        if m.definition is not None and m.definition not in sel.defs:
            raise GeneratorError(
                f"rules overlay names _meta type {m.definition!r}, which the schema does not define"
            )
        props = sel.defs.get(m.definition or "", {}).get("properties") or {}
        if m.task_id_field is not None and m.definition and m.task_id_field not in props:
            raise GeneratorError(
                f"rules overlay names task_id_field {m.task_id_field!r} of _meta type "
                f"{m.definition!r}, which has no such property"
            )
    return tuple(
        MetaKeyIR(m.key, m.name, m.type, m.definition, m.rule, m.task_id_field)
        for m in overlay.meta
    )


def _tool_task_support(overlay: Overlay, sel: Selection) -> ToolTaskSupportIR:
    """The overlay's ``taskSupport`` rules, checked against the schema's values and errors."""
    rule = overlay.tool_task_support
    where = f"rules overlay for {overlay.revision}: [tool_task_support]"
    values = set(sel.task_support_values)
    named = {rule.default, *rule.may, *rule.must}
    if values and not named <= values:
        raise GeneratorError(
            f"{where} names values the schema's taskSupport lacks: {sorted(named - values)}"
        )
    errors = {e.name for e in overlay.errors}
    for name in (rule.forbidden_error, rule.required_error):
        if name not in errors:
            raise GeneratorError(f"{where} names error {name!r}, which [[errors]] lacks")
    return ToolTaskSupportIR(
        rule.method,
        rule.path,
        rule.default,
        rule.may,
        rule.must,
        rule.forbidden_error,
        rule.required_error,
    )


def _constants(
    methods: tuple[MethodIR, ...], augmentable: tuple[AugmentableIR, ...]
) -> tuple[tuple[str, str], ...]:
    constants = {constant_name(m.method): m.method for m in methods}
    constants.update({constant_name(a.method): a.method for a in augmentable})
    return tuple(sorted(constants.items()))


def build_ir(
    loaded: LoadedSchema,
    sel: Selection,
    overlay: Overlay,
    package: str,
    version: str,
    url: str | None = None,
) -> IR:
    """The IR of one schema's face; ``url``: where the schema was fetched from, if it was."""
    from mcptask_gen.extselect import variant_unions
    from mcptask_gen.pinned import origin_of
    from mcptask_gen.select import TASK_PROPERTY

    methods, augmentable = _methods(sel)
    life = _lifecycle(overlay, sel)
    support = _tool_task_support(overlay, sel)
    return IR(
        generator_version=version,
        schema_source=origin_of(loaded.file_sha256, loaded.sha256) or url or loaded.path.name,
        schema_sha256=loaded.sha256,
        revision=loaded.revision,
        package=package,
        methods=methods,
        augmentable=augmentable,
        statuses=life.statuses,
        initial=life.initial,
        terminal=life.terminal,
        transitions=life.transitions,
        status_names=life.status_names,
        errors=_errors(overlay),
        meta_keys=_meta_keys(overlay, sel),
        capability_models=dict(sorted(sel.capabilities.items())),
        capability_requests={
            side: tuple("/".join(p) for p in paths)
            for side, paths in sorted(sel.capability_requests.items())
        },
        capability_flags=dict(sorted(sel.capability_flags.items())),
        task_model=sel.task_def,
        status_model=sel.status_def,
        task_metadata_model=sel.task_metadata_def,
        task_param=TASK_PROPERTY,
        create_result_model=sel.create_result_def,
        task_support_model=sel.task_support_def,
        task_support_values=sel.task_support_values,
        tool_task_support=support,
        model_names=tuple(sorted(sel.defs)),
        method_constants=_constants(methods, augmentable),
        model_roles=_model_roles(overlay, sel, methods),
        server_request_methods=_union_methods(loaded, "ServerRequest"),
        ttl_nullable=_ttl_nullable(sel),
        task_support_default=support.default,
        face=overlay.face,
        kind=overlay.kind,
        extension=_extension(overlay, sel),
        variants=variant_unions(sel.defs),
    )


def _extension(overlay: Overlay, sel: Selection) -> ExtensionIR | None:
    ext = overlay.extension
    if ext is None:
        return None
    names = {e.name for e in overlay.errors}
    for error in (ext.missing_capability_error, ext.header_mismatch_error):
        if error not in names:
            raise GeneratorError(
                f"rules overlay for {overlay.face}: [extension] names error {error!r}, "
                "which [[errors]] lacks"
            )
    if ext.tool_error not in sel.statuses:
        raise GeneratorError(
            f"rules overlay for {overlay.face}: [extension].tool_error {ext.tool_error!r} "
            "is not a status of the schema"
        )
    return ExtensionIR(
        id=ext.id,
        result_type_task=ext.result_type_task,
        result_type_complete=ext.result_type_complete,
        client_meta_key=ext.client_meta_key,
        server_capability_path=ext.server_capability_path,
        capability_model=ext.capability_def,
        gate_methods=ext.gate_methods,
        removed_methods=ext.removed_methods,
        routing_name_param=ext.routing_name_param,
        routing_headers=ext.routing_headers,
        missing_capability_error=ext.missing_capability_error,
        header_mismatch_error=ext.header_mismatch_error,
        tool_error=ext.tool_error,
        notification_channel=ext.notification_channel,
        notification_filter=ext.notification_filter,
        notification_filter_model=ext.notification_filter_def,
        detailed_task_model=_detailed_task(sel),
    )


def _detailed_task(sel: Selection) -> str | None:
    """The status union whose variants are task shapes themselves, not results around one."""
    from mcptask_gen.extselect import variant_unions
    from mcptask_gen.reshape import TASK_SHAPE

    for union, pairs in variant_unions(sel.defs):
        bodies = [sel.defs.get(model, {}).get("properties") for _, model in pairs]
        if all(isinstance(b, dict) and TASK_SHAPE <= set(b) for b in bodies):
            return union
    return None


@dataclass(frozen=True)
class Package:
    """The package the renderer is given: every face, and what the top-level templates see."""

    faces: tuple[IR, ...]  # one per schema, ordered by revision
    ir: IR  # the newest core face (else the first), with the errors of every face
    core: IR | None  # the newest core face


def merge_faces(faces: Sequence[IR]) -> Package:
    """The faces of one package (argument order never matters): one per face name and
    revision, one state machine (one engine serves them all), one code and message per
    error name."""
    ordered = tuple(sorted(faces, key=lambda f: (f.revision, f.kind, f.face)))
    for what in ("face", "revision"):
        seen = [str(getattr(ir, what)) for ir in ordered]
        for value in seen:
            if seen.count(value) > 1:
                raise GeneratorError(
                    f"two schemas make the same {what} {value!r}: give each revision's schema once"
                )
    core = [f for f in ordered if f.kind == "core"]
    primary = core[-1] if core else ordered[0]
    errors: dict[str, ErrorIR] = {}
    for face in ordered:
        for e in face.errors:
            seen_error = errors.get(e.name)
            if seen_error is not None and (seen_error.code, seen_error.message) != (
                e.code,
                e.message,
            ):
                raise GeneratorError(
                    f"error {e.name!r} differs between faces: {seen_error.code} "
                    f"{seen_error.message!r} vs {e.code} {e.message!r} ({face.face})"
                )
            errors.setdefault(e.name, e)
        if _machine(face) != _machine(primary):
            raise GeneratorError(
                f"the task statuses, terminal set or transitions of {face.face} differ from "
                f"those of {primary.face}: one package has one state machine"
            )
    package = replace(primary, errors=tuple(_bases_first(list(errors.values()))))
    return Package(faces=ordered, ir=package, core=core[-1] if core else None)


def _machine(ir: IR) -> tuple[object, ...]:
    moves = {status: frozenset(targets) for status, targets in ir.transitions}
    return frozenset(ir.statuses), ir.initial, frozenset(ir.terminal), moves


def _bases_first(errors: list[ErrorIR]) -> list[ErrorIR]:
    out: list[ErrorIR] = []
    names = {e.name for e in errors}
    pending = list(errors)
    for _ in range(len(errors) ** 2 + 1):
        if not pending:
            break
        e = pending.pop(0)
        if e.base == "TaskError" or e.base in {o.name for o in out} or e.base not in names:
            out.append(e)
        else:
            pending.append(e)
    return out
