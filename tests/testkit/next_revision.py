"""The next revision, simulated: the schemas of a revision mcptask-gen does not know, and a
user's revision of a schema (:func:`revised`: an optional ``resultSummary`` on a completed
task).

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


#: the field a user's revised schema adds to every completed task
FIELD = "resultSummary"


def with_result_summary(doc: dict[str, Any]) -> dict[str, Any]:
    """A copy of a schema whose completed task has an optional ``resultSummary``: every copy
    of the extension's ``CompletedTask`` (its schema inlines them), or the 2025-11-25
    ``Task`` (one shape for every status there)."""
    doc = json.loads(json.dumps(doc))
    summary = {"type": "string", "description": "What the result says, in short."}

    def completed(node: Any) -> None:
        if isinstance(node, dict):
            props = node.get("properties")
            if isinstance(props, dict):
                status = props.get("status")
                if isinstance(status, dict) and status.get("const") == "completed":
                    props[FIELD] = summary
            for value in node.values():
                completed(value)
        elif isinstance(node, list):
            for value in node:
                completed(value)

    if "CompletedTask" in doc["$defs"]:
        completed(doc["$defs"])
    else:
        doc["$defs"]["Task"]["properties"][FIELD] = summary
    return doc


def revised(tmp: Path, schema: Path) -> Path:
    """``schema`` with ``resultSummary``, written under ``tmp`` with the same file name."""
    return write_schema(
        tmp / "revised" / schema.parent.name / schema.name,
        with_result_summary(json.loads(schema.read_text())),
    )
