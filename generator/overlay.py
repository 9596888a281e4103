"""The rules overlay (``schema/<revision>.toml``) parsed into a typed, frozen object.

What the JSON schema cannot say (the state machine, the error codes and messages, the
``_meta`` keys, the tool-level ``taskSupport`` rules, stable role names of models) is
written once per protocol revision there. A malformed overlay ends in one line naming the
entry and what it should be, never a ``KeyError`` traceback.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from typing import Any

from mcptask_gen.errors import GeneratorError

#: Status roles the runtime names (``WORKING`` ...), each mapped to a status in ``[lifecycle]``.
STATUS_ROLES = ("working", "input_required", "completed", "failed", "cancelled")


@dataclass(frozen=True)
class Lifecycle:
    initial: str
    terminal: tuple[str, ...]
    #: status -> the statuses it may move to (R-STATE-2), in overlay order
    transitions: tuple[tuple[str, tuple[str, ...]], ...]
    #: role (``working``, ``failed`` ...) -> status value
    roles: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class ErrorRule:
    name: str
    base: str
    code: int
    message: str
    rule: str
    #: the ``data`` the error carries when the raiser gives none (a JSON object), or None
    data: dict[str, Any] | None = None


@dataclass(frozen=True)
class MetaRule:
    key: str
    name: str
    definition: str | None
    type: str
    rule: str
    task_id_field: str | None = None


@dataclass(frozen=True)
class ToolTaskSupportRule:
    method: str
    path: tuple[str, ...]
    default: str
    may: tuple[str, ...]
    must: tuple[str, ...]
    forbidden_error: str
    required_error: str


@dataclass(frozen=True)
class RoleRule:
    method: str
    params: str | None
    result: str | None


@dataclass(frozen=True)
class ExtensionRule:
    """What an extension's schema cannot say (``[extension]``), each entry citing its rule."""

    id: str  # X-ID-1
    result_type_task: str  # X-RT-1: the ``resultType`` of a create answer
    result_type_complete: str  # X-RT-2: of every other answer
    client_meta_key: str  # X-CAP-1: params._meta[key].extensions[id]
    server_capability_path: tuple[str, ...]  # X-CAP-2: in the server/discover result
    capability_def: str  # X-CAP-3: the schema's type of the extension's settings
    gate_methods: tuple[str, ...]  # X-CAP-10, A-11: -32021 before the taskId lookup
    removed_methods: tuple[str, ...]  # X-COMPAT-4: -32601 on this face
    routing_name_param: str  # X-HTTP-1: the params member Mcp-Name carries
    routing_headers: tuple[str, str]  # X-HTTP-1, X-HTTP-2: (method header, name header)
    missing_capability_error: str  # X-CAP-8: error of a task-required call without it
    header_mismatch_error: str  # X-HTTP-4
    tool_error: str  # X-ERR-4, X-GET-9: the status of a tool result with isError
    notification_channel: str  # X-NOTIF-1: the request whose stream carries notifications
    notification_filter: str  # X-NOTIF-2: its params member listing task ids
    notification_filter_def: str  # the schema's type of that filter


@dataclass(frozen=True)
class Overlay:
    revision: str
    lifecycle: Lifecycle
    errors: tuple[ErrorRule, ...]
    meta: tuple[MetaRule, ...]
    tool_task_support: ToolTaskSupportRule
    roles: tuple[RoleRule, ...]
    #: the subpackage this overlay's schema is generated into (``core``, ``extension``)
    face: str = ""
    #: ``core`` (tasks in the protocol) or ``extension`` (tasks as an extension)
    kind: str = "core"
    #: run the reshape pre-pass (``mcptask_gen.reshape``) before selecting
    reshape: bool = False
    extension: ExtensionRule | None = None


class _Reader:
    """Typed access to one TOML table, naming the entry in every error."""

    def __init__(self, source: str, where: str, table: Any, known: tuple[str, ...]) -> None:
        self.source, self.where = source, where
        if not isinstance(table, dict):
            self.fail(f"{where} must be a table")
        self.table: dict[str, Any] = table
        unknown = sorted(set(table) - set(known))
        if unknown:
            self.fail(f"{where} has unknown key {unknown[0]!r} (known: {', '.join(known)})")

    def fail(self, message: str) -> None:
        raise GeneratorError(f"rules overlay {self.source}: {message}")

    def _get(self, key: str, kind: type | tuple[type, ...], what: str, default: Any) -> Any:
        value = self.table.get(key, default)
        if value is _REQUIRED:
            self.fail(f"{self.where} lacks {key!r} ({what})")
        if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
            self.fail(f"{self.where}.{key} must be {what}, not {value!r}")
        return value

    def text(self, key: str, default: Any = None) -> Any:
        return self._get(key, str, "a string", _REQUIRED if default is None else default)

    def optional_text(self, key: str) -> str | None:
        value: str | None = self._get(key, str, "a string", None)
        return value

    def integer(self, key: str) -> int:
        value: int = self._get(key, int, "an integer", _REQUIRED)
        return value

    def texts(self, key: str, default: Any = None) -> tuple[str, ...]:
        value = self._get(
            key, list, "an array of strings", _REQUIRED if default is None else default
        )
        if not all(isinstance(v, str) for v in value):
            self.fail(f"{self.where}.{key} must be an array of strings, not {value!r}")
        return tuple(value)

    def flag(self, key: str) -> bool:
        value = self.table.get(key, False)
        if not isinstance(value, bool):
            self.fail(f"{self.where}.{key} must be true or false, not {value!r}")
        return bool(value)

    def tables(self, key: str) -> list[Any]:
        value: list[Any] = self._get(key, list, "an array of tables", [])
        return value


_REQUIRED: Any = object()


def _lifecycle(source: str, table: Any) -> Lifecycle:
    r = _Reader(source, "[lifecycle]", table, ("initial", "terminal", "transitions", *STATUS_ROLES))
    moves = _Reader(
        source,
        "[lifecycle.transitions]",
        r.table.get("transitions", {}),
        tuple(r.table.get("transitions", {}) or ()),
    )
    return Lifecycle(
        initial=r.text("initial"),
        terminal=r.texts("terminal"),
        transitions=tuple((status, moves.texts(status)) for status in moves.table),
        roles=tuple((role, r.text(role)) for role in STATUS_ROLES if role in r.table),
    )


def _error(source: str, i: int, table: Any) -> ErrorRule:
    known = ("name", "base", "code", "message", "rule", "data")
    r = _Reader(source, f"[[errors]] #{i + 1}", table, known)
    data = r.table.get("data")
    if data is not None and not isinstance(data, dict):
        r.fail(f"[[errors]] #{i + 1}.data must be a table, not {data!r}")
    name = r.text("name")
    if not name.isidentifier():
        r.fail(f"[[errors]] #{i + 1}.name must be a Python class name, not {name!r}")
    message = r.text("message")
    try:
        message.format(**{f: "" for f in re.findall(r"{(\w+)}", message)})
    except (IndexError, KeyError, ValueError):
        r.fail(f"[[errors]] #{i + 1}.message is not a valid format template: {message!r}")
    return ErrorRule(
        name=name,
        base=r.text("base", "TaskError"),
        code=r.integer("code"),
        message=message,
        rule=r.text("rule", ""),
        data=data,
    )


def _meta(source: str, i: int, table: Any) -> MetaRule:
    r = _Reader(
        source, f"[[meta]] #{i + 1}", table, ("key", "name", "def", "type", "rule", "task_id_field")
    )
    definition = r.optional_text("def")
    return MetaRule(
        key=r.text("key"),
        name=r.text("name"),
        definition=definition,
        type=definition or r.text("type", "Any"),
        rule=r.text("rule", ""),
        task_id_field=r.optional_text("task_id_field"),
    )


def _tool_task_support(source: str, table: Any) -> ToolTaskSupportRule:
    known = ("method", "path", "default", "may", "must", "forbidden_error", "required_error")
    r = _Reader(source, "[tool_task_support]", table, known)
    return ToolTaskSupportRule(
        method=r.text("method"),
        path=r.texts("path", []),
        default=r.text("default"),
        may=r.texts("may"),
        must=r.texts("must"),
        forbidden_error=r.text("forbidden_error"),
        required_error=r.text("required_error"),
    )


def _roles(source: str, table: Any) -> tuple[RoleRule, ...]:
    r = _Reader(source, "[roles]", table, tuple(table) if isinstance(table, dict) else ())
    out = []
    for method in sorted(r.table):
        entry = _Reader(source, f"[roles].{method!r}", r.table[method], ("params", "result"))
        out.append(RoleRule(method, entry.optional_text("params"), entry.optional_text("result")))
    return tuple(out)


_EXTENSION_KEYS = (
    "id",
    "result_type_task",
    "result_type_complete",
    "client_meta_key",
    "server_capability_path",
    "capability_def",
    "gate_methods",
    "removed_methods",
    "routing_name_param",
    "routing_headers",
    "missing_capability_error",
    "header_mismatch_error",
    "tool_error",
    "notification_channel",
    "notification_filter",
    "notification_filter_def",
)


def _extension(source: str, table: Any) -> ExtensionRule | None:
    if table is None:
        return None
    r = _Reader(source, "[extension]", table, _EXTENSION_KEYS)
    headers = r.texts("routing_headers")
    if len(headers) != 2:
        r.fail(f"[extension].routing_headers must name two headers, not {list(headers)!r}")
    lists = ("server_capability_path", "gate_methods", "removed_methods")
    values: dict[str, Any] = {
        k: r.texts(k) if k in lists else r.text(k)
        for k in _EXTENSION_KEYS
        if k != "routing_headers"
    }
    return ExtensionRule(**values, routing_headers=(headers[0], headers[1]))


def parse_overlay(source: str, text: str) -> Overlay:
    """The overlay in ``text`` (named ``source`` in errors)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise GeneratorError(f"rules overlay {source}: invalid TOML: {exc}") from None
    known = (
        "revision",
        "face",
        "kind",
        "reshape",
        "lifecycle",
        "errors",
        "meta",
        "tool_task_support",
        "roles",
        "extension",
    )
    top = _Reader(source, "the top level", data, known)
    face = top.text("face")
    if not face.isidentifier() or not face.isascii():
        top.fail(f"face must be a Python identifier (the subpackage's name), not {face!r}")
    kind = top.text("kind", "core")
    if kind not in ("core", "extension") or (kind == "extension") != ("extension" in data):
        top.fail(f"kind {kind!r} must be 'core', or 'extension' with an [extension] table")
    errors = tuple(_error(source, i, t) for i, t in enumerate(top.tables("errors")))
    names = [e.name for e in errors]
    for e in errors:
        if e.base != "TaskError" and e.base not in names[: names.index(e.name)]:
            top.fail(
                f"error {e.name!r} has base {e.base!r}, which is not an error listed before it"
            )
    return Overlay(
        revision=top.text("revision"),
        lifecycle=_lifecycle(source, data.get("lifecycle")),
        errors=errors,
        meta=tuple(_meta(source, i, t) for i, t in enumerate(top.tables("meta"))),
        tool_task_support=_tool_task_support(source, data.get("tool_task_support")),
        roles=_roles(source, data.get("roles", {})),
        face=face,
        kind=kind,
        reshape=top.flag("reshape"),
        extension=_extension(source, data.get("extension")),
    )
