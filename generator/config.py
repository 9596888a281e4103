"""Options from ``[tool.mcptask-gen]`` in a pyproject.toml; command-line flags win."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from mcptask_gen.errors import GeneratorError

KEYS = {"schema", "output", "package-name", "revision", "templates", "rules", "with-runtime"}
#: keys whose value is a boolean
BOOL_KEYS = {"with-runtime"}
PATH_KEYS = {"schema", "output", "templates", "rules"}


def read_config(pyproject: Path) -> dict[str, Any]:
    if not pyproject.is_file():
        return {}
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise GeneratorError(f"cannot read {pyproject}: {exc}") from None
    section = data.get("tool", {}).get("mcptask-gen", {})
    if not isinstance(section, dict):
        raise GeneratorError(f"[tool.mcptask-gen] in {pyproject} must be a table")
    unknown = sorted(set(section) - KEYS)
    if unknown:
        raise GeneratorError(
            f"unknown key {unknown[0]!r} in [tool.mcptask-gen] of {pyproject} (known: {', '.join(sorted(KEYS))})"
        )
    out: dict[str, Any] = {}
    for key, value in section.items():
        if key in BOOL_KEYS:
            if not isinstance(value, bool):
                raise GeneratorError(
                    f"[tool.mcptask-gen] {key} in {pyproject} must be true or false"
                )
            out[key] = value
            continue
        many = key in ("schema", "revision")
        values = value if many and isinstance(value, list) and value else [value]
        if not all(isinstance(v, str) for v in values):
            what = "a string or an array of strings" if many else "a string"
            raise GeneratorError(f"[tool.mcptask-gen] {key} in {pyproject} must be {what}")
        paths = [
            (pyproject.parent / v)
            if key in PATH_KEYS and not v.startswith(("http://", "https://"))
            else v
            for v in values
        ]
        out[key] = paths if isinstance(value, list) else paths[0]
    return out
