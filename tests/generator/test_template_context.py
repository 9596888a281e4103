"""``--list-template-context`` documents every name a ``--templates`` template can use, from
the IR's own definitions: each IR field, each filter and function of the environment, and
every ``ir.*`` name the built-in templates use."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from mcptask_gen import context, ir
from mcptask_gen.ir import IR
from mcptask_gen.render import _env
from testkit.gen import REPO, run_cli


def test_every_ir_field_is_documented() -> None:
    text = run_cli("--list-template-context").output
    for cls in context.ir_classes():
        prefix = "ir" if cls is IR else cls.__name__
        for f in dataclasses.fields(cls):
            assert f.metadata.get("doc"), f"{cls.__name__}.{f.name} has no doc"
            assert f"  {prefix}.{f.name}: " in text
    # Every IR dataclass a field holds is described too.
    described = set(context.ir_classes())
    for name in dir(ir):
        obj = getattr(ir, name)
        if dataclasses.is_dataclass(obj) and name.endswith("IR") and not name.startswith("_"):
            assert obj in described, name


def test_environment_matches_the_reference() -> None:
    env = _env([REPO / "templates"])
    for name in context.FILTERS:
        assert name in env.filters
    for name, fn in context.FUNCTIONS.items():
        assert env.globals[name] is fn
    ours = {"bracket", "fset", "union"}
    assert ours == set(context.FUNCTIONS)


def test_built_in_templates_use_only_documented_names() -> None:
    fields = {f.name for f in dataclasses.fields(IR)}
    for path in sorted((REPO / "templates").glob("*.jinja")):
        for name in re.findall(r"\bir\.(\w+)", path.read_text()):
            assert name in fields, f"{path.name} uses ir.{name}, which the IR lacks"


def test_exits_without_needing_a_schema(tmp_path: Path) -> None:
    result = run_cli("--list-template-context")
    assert result.exit_code == 0 and "ir.methods" in result.output
