"""The pipeline is a walk of named stages (``mcptask_gen.pipeline``'s docstring lists them in
order), and each schema is selected once."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from mcptask_gen import ir, pipeline
from testkit.gen import PINNED, SCHEMA_0728, run_cli

STAGES = [
    "load_schema",
    "reshape_schema",
    "select_tasks",
    "face_ir",
    "ir.merge_faces",
    "start_models",
    "render",
    "format_files",
    "write_files",
]


def test_the_docstring_lists_every_stage_in_order() -> None:
    doc = pipeline.__doc__ or ""
    listed = re.findall(r"^\d+\. ``([\w.]+)``", doc, re.M)
    assert listed == STAGES
    for name in listed:
        owner, _, attr = name.rpartition(".")
        assert callable(getattr(ir if owner == "ir" else pipeline, attr)), name
    assert "``check_files``" in doc  # stage 9 under --check


@pytest.fixture
def selections(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often each schema file was selected (core and extension selection alike)."""
    calls: Counter[str] = Counter()
    for name in ("select", "select_extension"):
        real = getattr(pipeline, name)

        def counted(loaded: Any, *args: Any, _real: Any = real) -> Any:
            calls[str(loaded.path)] += 1
            return _real(loaded, *args)

        monkeypatch.setattr(pipeline, name, counted)
    return calls


def test_each_schema_is_selected_once(tmp_path: Path, selections: Counter[str]) -> None:
    pipeline.build(pipeline.Options(schema=PINNED[0], more=PINNED[1:], output=tmp_path / "pkg"))
    assert selections == Counter({str(p): 1 for p in PINNED})


def test_a_schema_without_overlay_says_it_has_no_tasks_unselected(
    tmp_path: Path, selections: Counter[str]
) -> None:
    """The core 2026-07-28 schema (no overlay: its tasks moved to the extension) is told apart
    by one scan, not by running the selection for its error."""
    from mcptask_gen.load import known_revisions

    (why,) = [r["no_tasks"] for r in known_revisions() if r.get("no_tasks") and "2026" in r["id"]]
    out = tmp_path / "pkg"
    result = run_cli(SCHEMA_0728, "-o", out)
    assert result.exit_code == 2
    assert result.output == f"mcptask-gen: error: {SCHEMA_0728}: {why}\n"
    assert not selections and not out.exists()
