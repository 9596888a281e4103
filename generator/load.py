"""load: read the schema file, hash it, parse it, recognise the protocol revision."""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from collections import Counter
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from mcptask_gen.errors import GeneratorError
from mcptask_gen.overlay import Overlay, parse_overlay

MAX_SCHEMA_BYTES = 64 * 1024 * 1024
_SPEC_LINK = re.compile(r"/specification/(\d{4}-\d{2}-\d{2}|draft)/")
#: A dated path segment of a schema's ``$id`` (``.../schema/2025-11-25/schema.json``).
_ID_REVISION = re.compile(r"/(\d{4}-\d{2}-\d{2})/")
#: How a schema's revision was found (``LoadedSchema.named_by``).
BY_FLAG, BY_ID, BY_LINKS, BY_SHA, BY_MARKERS = (
    "--revision",
    "its $id",
    "its documentation links",
    "its sha256",
    "its marker definitions",
)


@dataclass(frozen=True)
class LoadedSchema:
    path: Path
    sha256: str  # of the canonical JSON (sorted keys): the same for reordered $defs
    file_sha256: str  # of the file's bytes
    document: dict[str, Any]
    defs: dict[str, Any]
    defs_key: str  # "$defs" or "definitions"
    revision: str
    #: the rules overlay's name (``2025-11-25``, ``2026-07-28-tasks``): one revision may have
    #: several schemas (the core protocol's and an extension's)
    overlay: str = ""
    #: how ``revision`` was found (``BY_ID`` ...; ``mcptask_gen.choose`` may name it otherwise)
    named_by: str = ""
    #: the overlay is the one shipped for this schema's revision; False when it was supplied
    #: by the shape of the schema's task definitions or by the user's ``--rules`` file, so it
    #: cannot vouch for what it says of the schema's identity (the extension's name, X-ID-1)
    own_rules: bool = True


def rules_dir() -> Any:
    """The rules overlay shipped with the generator (the repository's ``schema/``)."""
    return resources.files("mcptask_gen.rules")


def _read_toml(name: str) -> dict[str, Any]:
    node = rules_dir().joinpath(name)
    if not node.is_file():
        raise GeneratorError(f"rules overlay {name} is missing from the mcptask-gen installation")
    return tomllib.loads(node.read_text(encoding="utf-8"))


def known_revisions() -> list[dict[str, Any]]:
    revisions: list[dict[str, Any]] = _read_toml("revisions.toml")["revision"]
    return revisions


def revision_entry(revision: str) -> dict[str, Any] | None:
    """The ``revisions.toml`` entry ``revision`` names: an overlay name (``2026-07-28-tasks``)
    first, else a revision's own entry (the core protocol's, not an extension's)."""
    entries = known_revisions()
    hit = next((e for e in entries if e.get("overlay") == revision), None)
    return hit or next((e for e in entries if e["id"] == revision and "overlay" not in e), None)


def overlay_revisions() -> list[str]:
    return sorted(
        p.name.removesuffix(".toml")
        for p in rules_dir().iterdir()
        if p.name.endswith(".toml") and p.name != "revisions.toml"
    )


def load_overlay(revision: str, given: bool = True, path: Path | None = None) -> Overlay:
    """The typed rules overlay of ``revision``; ``given``: it came from ``--revision`` (else it
    was inferred from the schema at ``path``)."""
    known = overlay_revisions()
    if revision not in known:
        why = next(
            (
                str(r["no_tasks"])
                for r in known_revisions()
                if r["id"] == revision and "no_tasks" in r
            ),
            "mcptask-gen has no rules overlay for it",
        )
        if given:
            raise GeneratorError(
                f"--revision {revision!r} cannot be generated: {why}; revisions with rules: "
                f"{', '.join(known)}"
            )
        raise GeneratorError(
            f"{path} is protocol revision {revision!r}, which cannot be generated: {why}; "
            f"revisions with rules: {', '.join(known)} (pass --revision only if the schema is one of them)"
        )
    name = f"{revision}.toml"
    node = rules_dir().joinpath(name)
    if not node.is_file():
        raise GeneratorError(f"rules overlay {name} is missing from the mcptask-gen installation")
    return parse_overlay(name, node.read_text(encoding="utf-8"))


def read_schema(path: Path) -> tuple[bytes, str]:
    if not path.exists():
        raise GeneratorError(f"schema file not found: {path}")
    if path.is_dir():
        raise GeneratorError(f"schema path is a directory, not a file: {path}")
    try:
        size = path.stat().st_size
        if size > MAX_SCHEMA_BYTES:
            raise GeneratorError(
                f"schema file too large: {path} is {size} bytes (limit {MAX_SCHEMA_BYTES})"
            )
        raw = path.read_bytes()
    except PermissionError:
        raise GeneratorError(f"schema file not readable (permission denied): {path}") from None
    except OSError as exc:
        raise GeneratorError(f"schema file not readable: {path}: {exc.strerror}") from None
    return raw, hashlib.sha256(raw).hexdigest()


def parse_json(path: Path, raw: bytes) -> Any:
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise GeneratorError(f"schema file is not UTF-8 text: {path} (byte {exc.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise GeneratorError(
            f"invalid JSON in {path}: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except RecursionError:
        raise GeneratorError(f"invalid JSON in {path}: nested too deeply") from None


def _spec_links(document: dict[str, Any]) -> Counter[str]:
    links: Counter[str] = Counter()

    def walk(node: Any, depth: int = 0) -> None:
        if depth > 64:
            return
        if isinstance(node, dict):
            desc = node.get("description")
            if isinstance(desc, str):
                links.update(_SPEC_LINK.findall(desc))
            for value in node.values():
                walk(value, depth + 1)
        elif isinstance(node, list):
            for value in node:
                walk(value, depth + 1)

    walk(document)
    return links


def _entry_key(entry: dict[str, Any]) -> tuple[str, str]:
    """(revision, overlay name) of a ``revisions.toml`` entry."""
    rev = str(entry["id"])
    return rev, str(entry.get("overlay", rev))


def _matches(entry: dict[str, Any], defs: dict[str, Any], sha: str) -> bool:
    markers = entry.get("markers", [])
    return sha in entry.get("sha256", []) or bool(markers and all(m in defs for m in markers))


def named_revision(document: dict[str, Any]) -> tuple[str, str] | None:
    """(revision, ``BY_ID`` or ``BY_LINKS``): the revision a schema names itself, by the dated
    segment of its ``$id``, else by its documentation links (the revision most of them name;
    ``draft`` names none)."""
    schema_id = document.get("$id")
    dated = _ID_REVISION.findall(schema_id) if isinstance(schema_id, str) else []
    if dated:
        return str(dated[-1]), BY_ID
    links = [(n, rev) for rev, n in _spec_links(document).items() if rev != "draft"]
    return (max(links)[1], BY_LINKS) if links else None


def identify(
    document: dict[str, Any], defs: dict[str, Any], sha: str, revision: str | None = None
) -> tuple[str, str, str] | None:
    """(revision, overlay name, how the revision was found) of a schema: ``revision`` (a
    revision or an overlay name) when given, else the revision the schema names itself
    (``named_revision``), else the sha256 or markers of a known file. Of several schemas of one
    revision, the one whose sha256 or markers match."""
    entries = known_revisions()
    how = BY_FLAG
    if revision is None:
        named = named_revision(document)
        revision, how = named if named else (None, "")
    if revision is None:
        hit = next((e for e in entries if sha in e.get("sha256", [])), None)
        if hit:
            return (*_entry_key(hit), BY_SHA)
        hit = next((e for e in entries if _matches(e, defs, "")), None)
        return (*_entry_key(hit), BY_MARKERS) if hit else None
    same = [e for e in entries if revision in _entry_key(e)]
    best = next((e for e in same if _matches(e, defs, sha)), None)
    best = best or next((e for e in same if "overlay" not in e), None)
    return (*_entry_key(best), how) if best else (revision, revision, how)


def recognise(
    document: dict[str, Any], defs: dict[str, Any], sha: str, revision: str | None = None
) -> tuple[str, str] | None:
    """(revision, overlay name) of a schema (``identify``)."""
    found = identify(document, defs, sha, revision)
    return (found[0], found[1]) if found else None


def canonical_sha256(document: Any) -> str:
    """The sha256 of a schema's canonical JSON (sorted keys, no spaces): the same for a
    schema whose definitions were reordered or reformatted."""
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def load(path: Path, revision: str | None) -> LoadedSchema:
    raw, sha = read_schema(path)
    document = parse_json(path, raw)
    if not isinstance(document, dict):
        raise GeneratorError(
            f"not a JSON Schema: {path} holds a JSON {type(document).__name__}, not an object"
        )
    defs_key = "$defs" if "$defs" in document else "definitions"
    defs = document.get(defs_key)
    looks_like_schema = "$schema" in document or isinstance(defs, dict)
    if not looks_like_schema:
        raise GeneratorError(
            f"not a JSON Schema: {path} has neither '$schema' nor '$defs'/'definitions'"
        )
    if not isinstance(defs, dict):
        raise GeneratorError(
            f"not an MCP schema: {path} has no '$defs' (or 'definitions') object of type definitions"
        )
    bad = sorted(k for k, v in defs.items() if not isinstance(v, (dict, bool)))
    if bad:
        raise GeneratorError(f"not a JSON Schema: definition {bad[0]!r} in {path} is not an object")
    found = identify(document, defs, sha, revision)
    canonical_sha = canonical_sha256(document)
    if found is None:
        raise GeneratorError(
            f"cannot infer the protocol revision of {path}; pass --revision "
            f"(one of: {', '.join(overlay_revisions())})"
        )
    rev, overlay, how = found
    return LoadedSchema(path, canonical_sha, sha, document, defs, defs_key, rev, overlay, how)
