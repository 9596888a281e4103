"""The next revision, simulated: the schemas of a revision mcptask-gen does not know.

As the working group proposes to fold the tasks extension into the core protocol "in its
current form": the published core 2026-07-28 schema with the extension's 2026-07-28
definitions merged into its ``$defs``, named (or not) as revision 2027-03-31
(:func:`write_folded`); and the 2025-11-25 schema under the new revision's links
(:func:`write_core_next`, the core shape). Built at test time from the official schemas in
``schema/``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from testkit.gen import SCHEMA, SCHEMA_0728, SCHEMA_EXT, write_schema

NEXT = "2027-03-31"
SCHEMA_ID = f"https://modelcontextprotocol.io/schema/{NEXT}/schema.json"
LINK = f"https://modelcontextprotocol.io/specification/{NEXT}/basic/utilities/tasks"


def folded(naming: str = "id-and-link") -> dict[str, Any]:
    """The core 2026-07-28 schema with the extension's definitions merged into its ``$defs``,
    named ``NEXT`` by a dated ``$id`` and/or a documentation link, or not at all (``bare``)."""
    doc: dict[str, Any] = json.loads(SCHEMA_0728.read_text())
    ext = json.loads(SCHEMA_EXT.read_text())
    shared = set(doc["$defs"]) & set(ext["$defs"])
    assert all(doc["$defs"][n] == ext["$defs"][n] for n in shared), "copies of core types"
    doc["$defs"].update(ext["$defs"])
    if naming in ("id-and-link", "id"):
        doc = {"$schema": doc["$schema"], "$id": SCHEMA_ID} | doc
    if naming in ("id-and-link", "link"):
        task = dict(doc["$defs"]["Task"])
        task["description"] = f"{task.get('description', '')}\n\nSee [Tasks]({LINK}).".strip()
        doc["$defs"]["Task"] = task
    return doc


def write_folded(tmp: Path, naming: str = "id-and-link") -> Path:
    return write_schema(tmp / naming / "schema.json", folded(naming))


def write_core_next(tmp: Path) -> Path:
    """The 2025-11-25 schema under the new revision's documentation links: the core shape."""
    text = SCHEMA.read_text().replace("/specification/2025-11-25/", f"/specification/{NEXT}/")
    schema = tmp / "core-next" / "schema.json"
    schema.parent.mkdir(parents=True, exist_ok=True)
    schema.write_text(text)
    return schema
