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
class Overlay:
    revision: str
    lifecycle: Lifecycle
    errors: tuple[ErrorRule, ...]
    meta: tuple[MetaRule, ...]
    tool_task_support: ToolTaskSupportRule
    roles: tuple[RoleRule, ...]


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
    r = _Reader(source, f"[[errors]] #{i + 1}", table, ("name", "base", "code", "message", "rule"))
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
        path=r.texts("path"),
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


def parse_overlay(source: str, text: str) -> Overlay:
    """The overlay in ``text`` (named ``source`` in errors)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise GeneratorError(f"rules overlay {source}: invalid TOML: {exc}") from None
    known = ("revision", "lifecycle", "errors", "meta", "tool_task_support", "roles")
    top = _Reader(source, "the top level", data, known)
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
    )
