"""What a regeneration changes, said by model and method before any diff.

A reviewer of a generated-code change wants "``CompletedTask`` gained ``resultSummary``", not
26 files of diff. :func:`summarize` compares the package on disk with the files a run would
write: each face's ``models`` module by class (fields added, removed, or whose type changed;
enum values; type aliases) and its ``methods`` module by method name, then which files change
at all. Both sides are read as text (``ast``), never imported: the package on disk may be
broken, or not importable from here.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from mcptask_gen.write import MANIFEST_NAME

MODELS = "models.py"
METHODS = "methods.py"
#: names listed per kind of file change before "and N more"
SHOWN = 6


@dataclass(frozen=True)
class Model:
    """One class or type alias of a models module, as the summary compares it."""

    kind: str  # "model", "enum" or "alias"
    bases: tuple[str, ...] = ()
    #: field (or enum member) -> (its type, the whole declaration)
    fields: dict[str, tuple[str, str]] = field(default_factory=dict)


def _type_of(annotation: ast.expr) -> str:
    """An annotation's type, without the ``Annotated[..., Field(...)]`` around it."""
    if (
        isinstance(annotation, ast.Subscript)
        and isinstance(annotation.value, ast.Name)
        and annotation.value.id == "Annotated"
        and isinstance(annotation.slice, ast.Tuple)
        and annotation.slice.elts
    ):
        return ast.unparse(annotation.slice.elts[0])
    return ast.unparse(annotation)


def _is_enum(bases: tuple[str, ...]) -> bool:
    return any(base.endswith("Enum") for base in bases)


def read_models(text: str | None) -> dict[str, Model]:
    """Class name (or alias name) -> what it declares; empty for text that does not parse."""
    try:
        tree = ast.parse(text or "")
    except (SyntaxError, ValueError, RecursionError):
        return {}
    out: dict[str, Model] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            bases = tuple(ast.unparse(b) for b in node.bases)
            fields: dict[str, tuple[str, str]] = {}
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    if item.target.id != "model_config":
                        fields[item.target.id] = (_type_of(item.annotation), ast.unparse(item))
                elif isinstance(item, ast.Assign) and _is_enum(bases):
                    for target in item.targets:
                        if isinstance(target, ast.Name) and not target.id.startswith("_"):
                            value = ast.unparse(item.value)
                            fields[target.id] = (value, value)
            out[node.name] = Model("enum" if _is_enum(bases) else "model", bases, fields)
        elif (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Call)
            and ast.unparse(node.value.func) == "TypeAliasType"
            and len(node.value.args) == 2
        ):
            value = _type_of(node.value.args[1])
            out[node.targets[0].id] = Model("alias", (), {"": (value, value)})
    return out


def read_methods(text: str | None) -> set[str]:
    """The method names of a face's ``METHODS`` table."""
    try:
        tree = ast.parse(text or "")
    except (SyntaxError, ValueError, RecursionError):
        return set()
    for node in tree.body:
        if not (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id == "METHODS"
            and node.value is not None
        ):
            continue
        keys = [k for d in ast.walk(node.value) if isinstance(d, ast.Dict) for k in d.keys]
        return {k.value for k in keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    return set()


def _names(names: list[str], limit: int = SHOWN) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _model_lines(name: str, old: Model, new: Model) -> list[str]:
    """What changed in one model: ``CompletedTask: + resultSummary: str | None``."""
    parts: list[str] = []
    if old.kind != new.kind or old.bases != new.bases:
        was = f"{old.kind}({', '.join(old.bases)})" if old.bases else old.kind
        now = f"{new.kind}({', '.join(new.bases)})" if new.bases else new.kind
        parts.append(f"now {now}, was {was}")
    if new.kind == "alias":
        if old.fields != new.fields:
            parts.append(f"~ {old.fields[''][0]} -> {new.fields[''][0]}")
        return [f"{name}: {'; '.join(parts)}"] if parts else []
    member = "value" if new.kind == "enum" else ""
    for key in sorted(set(new.fields) - set(old.fields)):
        parts.append(f"+ {member}{' ' if member else ''}{key}: {new.fields[key][0]}")
    for key in sorted(set(old.fields) - set(new.fields)):
        parts.append(f"- {member}{' ' if member else ''}{key}")
    for key in sorted(set(old.fields) & set(new.fields)):
        (old_type, old_decl), (new_type, new_decl) = old.fields[key], new.fields[key]
        if old_type != new_type:
            parts.append(f"~ {key}: {old_type} -> {new_type}")
        elif old_decl != new_decl:
            parts.append(f"~ {key}: its default, alias or description")
    return [f"{name}: {'; '.join(parts)}"] if parts else []


def _face_lines(
    face: str, old: Mapping[str, str | None], new: Mapping[str, str | None]
) -> list[str]:
    lines: list[str] = []
    prefix = f"{face}/" if face else ""
    if old.get(MODELS) != new.get(MODELS):
        before, after = read_models(old.get(MODELS)), read_models(new.get(MODELS))
        added = sorted(set(after) - set(before))
        gone = sorted(set(before) - set(after))
        if added:
            lines.append(f"{prefix}{MODELS}: + {_names(added, 20)}")
        if gone:
            lines.append(f"{prefix}{MODELS}: - {_names(gone, 20)}")
        for name in sorted(set(before) & set(after)):
            lines += [
                f"{prefix}{MODELS}: {ln}" for ln in _model_lines(name, before[name], after[name])
            ]
    if old.get(METHODS) != new.get(METHODS):
        before_m, after_m = read_methods(old.get(METHODS)), read_methods(new.get(METHODS))
        if after_m - before_m:
            lines.append(f"{prefix}methods: + {', '.join(sorted(after_m - before_m))}")
        if before_m - after_m:
            lines.append(f"{prefix}methods: - {', '.join(sorted(before_m - after_m))} (gone)")
    return lines


@dataclass(frozen=True)
class Changes:
    """The files a run changes in a package that exists: by content, relative paths."""

    changed: list[str]
    new: list[str]
    gone: list[str]
    #: path -> its text on disk (the changed and gone files)
    old: dict[str, str | None]

    def before(self, rel: str, files: Mapping[str, str]) -> str | None:
        """``rel`` as it is on disk (None: not there): a file the run leaves is as written."""
        if rel in self.old:
            return self.old[rel]
        return None if rel in self.new else files.get(rel)

    @property
    def any(self) -> bool:
        return bool(self.changed or self.new or self.gone)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def changes(output: Path, files: Mapping[str, str], gone: list[str]) -> Changes:
    """How ``files`` differ from what ``output`` holds (``gone``: our files the run removes)."""
    changed: list[str] = []
    new: list[str] = []
    old: dict[str, str | None] = {}
    for rel, text in sorted(files.items()):
        if rel == MANIFEST_NAME:  # the list of our files: its change is theirs
            continue
        target = output / rel
        if not target.is_file():
            new.append(rel)
            continue
        current = _read(target)
        if current != text:
            changed.append(rel)
            old[rel] = current
    gone = [rel for rel in gone if (output / rel).is_file()]
    old |= {rel: _read(output / rel) for rel in gone}
    return Changes(changed, new, gone, old)


def summarize(found: Changes, files: Mapping[str, str]) -> list[str]:
    """The summary: per face, models and methods that changed, then the files that change."""
    if not found.any:
        return ["no file changes"]
    touched = {*found.changed, *found.new, *found.gone}
    faces = sorted(
        {
            rel.rsplit("/", 1)[0] if "/" in rel else ""
            for rel in touched
            if rel.endswith((f"/{MODELS}", f"/{METHODS}"))
        }
    )
    lines: list[str] = []
    for face in faces:
        prefix = f"{face}/" if face else ""
        old = {name: found.before(prefix + name, files) for name in (MODELS, METHODS)}
        new = {name: files.get(prefix + name) for name in (MODELS, METHODS)}
        lines += _face_lines(face, old, new)
    kinds = [("changed", found.changed), ("new", found.new), ("gone", found.gone)]
    said = ", ".join(f"{len(names)} {kind} ({_names(names)})" for kind, names in kinds if names)
    lines.append(f"files: {said}")
    return lines
