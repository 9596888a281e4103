"""The documents the generator answers to: the IR of every pinned schema (a snapshot), and
the whole output for the pinned schema (``generated/mcp_tasks``, the golden record). Both are
rewritten by one command, ``.venv/bin/python tests/generator/regen.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from testkit.gen import REPO, tree

from .regen import GENERATED, PINNED, ir_snapshot, snapshot_path

HOW = "regenerate with .venv/bin/python tests/generator/regen.py and review the diff"


@pytest.mark.parametrize("name", sorted(PINNED))
def test_ir_snapshot(name: str) -> None:
    expected = snapshot_path(name).read_text(encoding="utf-8")
    assert ir_snapshot(PINNED[name]) == expected, f"the IR of {name} changed; {HOW}"


def test_golden_record_of_the_whole_output(generated_pkg: Path) -> None:
    """A fresh generation equals generated/mcp_tasks file by file, byte by byte."""
    golden = {k: v for k, v in tree(GENERATED).items() if "__pycache__" not in k}
    fresh = tree(generated_pkg)
    assert sorted(fresh) == sorted(golden), f"files differ; {HOW}"
    for rel in sorted(golden):
        assert fresh[rel] == golden[rel], f"{rel} differs from generated/; {HOW}"


def test_readme_documents_the_command() -> None:
    assert "tests/generator/regen.py" in (REPO / "README.md").read_text(encoding="utf-8")
