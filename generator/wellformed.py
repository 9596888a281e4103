"""Well-formedness of selected definitions: each keyword the generator reads has one JSON type."""

from __future__ import annotations

from typing import Any

from mcptask_gen.errors import GeneratorError

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


def check_shapes(node: Any, path: str) -> None:
    """Name the first keyword of a selected definition whose value has the wrong JSON type."""
    if isinstance(node, list):
        for i, item in enumerate(node):
            check_shapes(item, f"{path}/{i}")
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
                    check_shapes(sub, f"{path}/{key}/{prop}")
            continue
        check_shapes(value, f"{path}/{key}")


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
