"""Regenerate everything the generator tests compare against, in one command:

    .venv/bin/python tests/generator/regen.py

- ``generated/mcp_tasks``: the package for both pinned schemas, 2025-11-25 and the tasks
  extension's release 2026-07-28 (the golden record of the whole output);
- ``tests/generator/snapshots/ir-<schema>.json``: the IR of each pinned schema.

Review the diff, then commit it with the change that caused it.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
#: The official schemas (``schema/<name>/schema.json``).
SCHEMAS = REPO / "schema"
SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
GENERATED = REPO / "generated" / "mcp_tasks"
#: Every schema with tasks the tests keep an IR snapshot of, by snapshot name: the pinned ones,
#: the 2025-11-25 schema as first published, and the tasks extension's draft (which must still
#: generate beside its release).
PINNED = {
    "2025-11-25": SCHEMAS / "2025-11-25" / "schema.json",
    "2025-11-25-original": SCHEMAS / "2025-11-25-original" / "schema.json",
    "ext-tasks-2026-07-28": SCHEMAS / "ext-tasks-2026-07-28" / "schema.json",
    "ext-tasks-draft": SCHEMAS / "ext-tasks-draft" / "schema.json",
}
#: The schemas of ``generated/mcp_tasks``, one face each: 2025-11-25 and the tasks extension's
#: stable release 2026-07-28 (users pin releases, not drafts).
GENERATED_FROM = (PINNED["2025-11-25"], PINNED["ext-tasks-2026-07-28"])


def ir_snapshot(schema: Path) -> str:
    """The IR of ``schema`` as stable JSON (the generator's version left out)."""
    from mcptask_gen.pipeline import analyse

    ir, _ = analyse(schema, None, "mcp_tasks")
    data: dict[str, Any] = dataclasses.asdict(ir)
    data.pop("generator_version")
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def snapshot_path(name: str) -> Path:
    return SNAPSHOTS / f"ir-{name}.json"


def main() -> int:
    from mcptask_gen.cli import main as cli

    SNAPSHOTS.mkdir(exist_ok=True)
    for name, schema in PINNED.items():
        snapshot_path(name).write_text(ir_snapshot(schema), encoding="utf-8")
        print(f"wrote {snapshot_path(name).relative_to(REPO)}")
    try:
        cli(
            [*map(str, GENERATED_FROM), "-o", str(GENERATED), "--with-runtime"],
            standalone_mode=False,
        )
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
