"""Why a generated package is out of date, as ``--check`` says it: its schema changed, another
generator wrote it, a face came or went, or (none of these) its files were changed after it
was written.

The package's ``descriptor`` module names what it was generated from (each face's schema
source and sha256, the generator's version); it is read as text (``ast``), never imported:
the package may be broken, or not importable from here.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mcptask_gen.ir import IR

DESCRIPTOR = "descriptor.py"


@dataclass(frozen=True)
class Recorded:
    """What a package's descriptor says it was generated from."""

    generator_version: str | None
    #: revision -> (schema source, schema sha256)
    faces: dict[str, tuple[str, str]]


def _literal(node: ast.expr) -> object:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError):
        return None


def read_recorded(package: Path) -> Recorded | None:
    """What ``package/descriptor.py`` records; None when it is missing or unreadable."""
    try:
        tree = ast.parse((package / DESCRIPTOR).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError, RecursionError):
        return None
    version: str | None = None
    faces: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        target, value = node.target, node.value
        if value is None:
            continue
        if target.id == "GENERATOR_VERSION":
            found = _literal(value)
            version = found if isinstance(found, str) else None
        elif target.id == "FACES":
            for call in ast.walk(value):
                if not isinstance(call, ast.Call):
                    continue
                fields = {k.arg: _literal(k.value) for k in call.keywords if k.arg}
                revision, sha = fields.get("revision"), fields.get("schema_sha256")
                if isinstance(revision, str) and isinstance(sha, str):
                    source = fields.get("schema_source")
                    faces[revision] = (source if isinstance(source, str) else "?", sha)
    return Recorded(version, faces)


def _short(source: str, sha: str) -> str:
    return f"{source} (sha256 {sha[:12]})"


def why_stale(package: Path, faces: Sequence[IR]) -> list[str]:
    """One line per reason ``package`` differs from what ``faces`` generate (call it only when
    it does differ)."""
    recorded = read_recorded(package)
    if recorded is None:
        return [f"{DESCRIPTOR} is missing or unreadable: the package is not one mcptask-gen wrote"]
    reasons: list[str] = []
    now = {ir.revision: (ir.schema_source, ir.schema_sha256) for ir in faces}
    for revision in sorted(set(recorded.faces) - set(now)):
        reasons.append(f"revision {revision} is in the package but not among the schemas given")
    for revision in sorted(set(now) - set(recorded.faces)):
        reasons.append(f"revision {revision} is new: the package has no face of it yet")
    for revision in sorted(set(now) & set(recorded.faces)):
        (old_source, old_sha), (new_source, new_sha) = recorded.faces[revision], now[revision]
        if old_sha != new_sha:
            reasons.append(
                f"the schema of revision {revision} changed: the package was generated from "
                f"{_short(old_source, old_sha)}, this run reads {_short(new_source, new_sha)}"
            )
    version = faces[0].generator_version if faces else None
    if recorded.generator_version != version:
        reasons.append(
            f"the package was written by mcptask-gen {recorded.generator_version or '(unknown)'}"
            f"; this is mcptask-gen {version}"
        )
    if not reasons:
        reasons.append(
            "its schemas and generator are the ones it was generated with, so its files were "
            "changed after (by hand?) or other options or templates are given now"
        )
    return reasons
