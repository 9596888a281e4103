"""The rules overlay is parsed into a typed object; a malformed one ends in one line naming
the entry, never a traceback."""

from __future__ import annotations

import pytest

from mcptask_gen.errors import GeneratorError
from mcptask_gen.load import load_overlay, rules_dir
from mcptask_gen.overlay import Overlay, parse_overlay

TEXT = rules_dir().joinpath("2025-11-25.toml").read_text(encoding="utf-8")


def test_shipped_overlay_is_typed() -> None:
    overlay = load_overlay("2025-11-25")
    assert isinstance(overlay, Overlay)
    assert overlay.lifecycle.initial == "working"  # R-STATE-1
    assert overlay.tool_task_support.default == "forbidden"  # R-TOOL-2
    assert "required" in overlay.tool_task_support.must  # R-TOOL-4
    names = [e.name for e in overlay.errors]
    assert names.index("InvalidParams") < names.index("TaskNotFound")


#: The code line of TaskNotFound, the sixth [[errors]] entry, and the base line before it.
CODE = 'code = -32602\nmessage = "Failed'
BASE = f'base = "InvalidParams"\n{CODE}'
CASES = [
    (CODE, CODE.replace("-32602", '"x"'), "#6.code must be an integer"),
    ('name = "TaskNotFound"\n', "", "[[errors]] #6 lacks 'name'"),
    ('initial = "working"', "initial = 3", "[lifecycle].initial must be a string"),
    ("[tool_task_support]\n", "[tool_task_support]\nextra = 1\n", "unknown key 'extra'"),
    (BASE, BASE.replace("InvalidParams", "Nope"), "base 'Nope'"),
    ("[roles]", "roles = 1\n[x]", "unknown key 'x'"),
    ("[lifecycle]", "[lifecycle", "invalid TOML"),
]


@pytest.mark.parametrize(("old", "new", "needle"), CASES)
def test_malformed_overlay_is_one_line(old: str, new: str, needle: str) -> None:
    assert old in TEXT
    with pytest.raises(GeneratorError) as info:
        parse_overlay("2025-11-25.toml", TEXT.replace(old, new, 1))
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("rules overlay 2025-11-25.toml: ")
    assert needle in message, message
