"""The error machinery behind the generated ``errors`` module: hand-written, copied verbatim.

``errors`` subclasses ``TaskError`` once per error of the rules overlay (its code and message
template) and answers ``error_from_payload`` through ``match_error`` over its own table.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import ValidationError

#: JSON-RPC's own "Internal error" code: the answer when nothing more specific is known.
INTERNAL_ERROR_CODE = -32603


class TaskError(Exception):
    """A JSON-RPC error answer: ``code``, ``message`` and optional ``data``."""

    code: int = INTERNAL_ERROR_CODE
    template: str = "Internal error"

    def __init__(self, message: str | None = None, *, data: Any = None) -> None:
        self.message = message if message is not None else self.template
        self.data = data
        super().__init__(self.message)

    def _text(self, message: str | None, **fields: object) -> str:
        """``message``, else the class's template filled with ``fields``."""
        return message if message is not None else self.template.format(**fields)

    def to_error(self) -> dict[str, Any]:
        """The JSON-RPC ``error`` object."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class JsonRpcError(TaskError):
    """Any JSON-RPC error, with the code it came with (a stored task error, R-RESULT-1)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        self.code = code
        super().__init__(message, data=data)

    @classmethod
    def from_error(cls, error: Mapping[str, Any]) -> JsonRpcError:
        return cls(
            int(error.get("code", INTERNAL_ERROR_CODE)),
            str(error.get("message", "")),
            error.get("data"),
        )


def describe_validation_error(exc: ValidationError, prefix: str = "params") -> str:
    """``params.taskId: Field required`` style text naming the first bad fields: the one
    formatter of validation errors for every answer (R-ERR-1)."""
    parts = []
    for err in exc.errors()[:3]:
        loc = ".".join(str(p) for p in (prefix, *err.get("loc", ())))
        parts.append(f"{loc}: {err.get('msg', 'invalid')}")
    return "; ".join(parts) or prefix


@cache
def _pattern(template: str) -> re.Pattern[str]:
    """A message template (``Invalid params: {detail}``) as a regex of its filled messages."""
    parts = re.split(r"({\w+})", template)
    return re.compile(
        "".join(".*" if p.startswith("{") else re.escape(p) for p in parts), re.DOTALL
    )


def match_error(error: Mapping[str, Any], classes: Iterable[type[TaskError]]) -> TaskError:
    """A JSON-RPC ``error`` object back to the most specific of ``classes`` (the last of them
    whose code and message template match: a subclass is listed after its base), else a
    ``JsonRpcError`` carrying the code as is."""
    code = error.get("code")
    message = error.get("message")
    data = error.get("data")
    if isinstance(code, int) and isinstance(message, str):
        for cls in reversed(tuple(classes)):
            if cls.code == code and _pattern(cls.template).fullmatch(message):
                exc = cls.__new__(cls)
                TaskError.__init__(exc, message, data=data)
                return exc
    return JsonRpcError(
        code if isinstance(code, int) else INTERNAL_ERROR_CODE,
        message if isinstance(message, str) else "",
        data,
    )
