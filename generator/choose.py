"""choose: which rules overlay a schema is generated with.

- the overlay shipped for the schema's revision (``schema/<overlay>.toml``), when there is one;
- else the schema's task definitions are found by structure (``detect``): a schema with none
  is refused as before, naming where its revision moved them;
- else the user's overlay file (``--rules FILE``), when given: it must be of the shape's kind,
  and it names the revision when the schema does not (no ``$id`` or documentation link);
- else the shipped overlay of the shape the definitions match (the newest of its kind), with
  one warning line naming what that overlay supplied, that the user should check it, and what
  no overlay can know: how the new revision negotiates tasks.

Either of the last two cannot vouch for the schema's identity (``LoadedSchema.own_rules``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from mcptask_gen import __version__
from mcptask_gen.detect import CORE, Found, find_tasks
from mcptask_gen.errors import GeneratorError
from mcptask_gen.load import (
    BY_FLAG,
    BY_ID,
    BY_LINKS,
    BY_MARKERS,
    LoadedSchema,
    known_revisions,
    load_overlay,
    named_revision,
    overlay_revisions,
)
from mcptask_gen.overlay import Overlay, parse_overlay
from mcptask_gen.select import no_tasks_message

#: Where the overlay format is described (named in the warning and in errors).
FORMAT_DOC = "docs/generator.md, 'Rules overlays'"
MAX_RULES_BYTES = 1024 * 1024


@dataclass(frozen=True)
class UserRules:
    """A rules overlay file the user gave (``--rules``), parsed."""

    path: Path
    overlay: Overlay
    #: the schemas it was used for (appended to by ``choose_rules``)
    used: list[Path] = field(default_factory=list, compare=False)


@dataclass(frozen=True)
class Chosen:
    loaded: LoadedSchema  # the revision named, ``overlay`` and ``own_rules`` set
    overlay: Overlay
    #: the one warning line, when the overlay is a shape's rather than the revision's own
    warning: str | None = None


def read_rules(path: Path) -> UserRules:
    """The overlay in the user's file ``path``; a file that cannot be read or parsed exits 2
    with one line naming the file and what is wrong."""
    where = f"--rules {path}"
    if not path.exists():
        raise GeneratorError(f"{where}: rules overlay file not found")
    if path.is_dir():
        raise GeneratorError(f"{where}: is a directory, not a rules overlay file (TOML)")
    try:
        if path.stat().st_size > MAX_RULES_BYTES:
            raise GeneratorError(f"{where}: too large for a rules overlay (over 1 MiB)")
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise GeneratorError(f"{where}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise GeneratorError(f"{where}: not readable: {exc.strerror}") from None
    return UserRules(path, parse_overlay(str(path), text))


def _shape_label(kind: str, overlay: Overlay) -> str:
    if kind == CORE:
        return f"the {overlay.revision} core protocol's tasks"
    return f"the {overlay.revision} tasks extension"


def _refuse_given(loaded: LoadedSchema, found: Found) -> None:
    """``--revision`` named a revision mcptask-gen knows to have no tasks: say so (as
    ``load_overlay`` always has), and that the schema holds tasks all the same. It named one
    mcptask-gen does not know, for a schema that names itself another (a typo, a wrong file):
    say that."""
    if loaded.named_by != BY_FLAG:
        return
    if any(r["id"] == loaded.revision and "no_tasks" in r for r in known_revisions()):
        try:
            load_overlay(loaded.overlay, given=True, path=loaded.path)
        except GeneratorError as exc:
            raise GeneratorError(
                f"{exc}; yet {loaded.path} holds task definitions ({', '.join(found.methods)}): "
                "if it is a newer revision, give that revision's name with --revision"
            ) from None
    own = named_revision(loaded.document)
    known = {str(r["id"]) for r in known_revisions()}
    if loaded.revision not in known and own is not None and own[0] != loaded.revision:
        raise GeneratorError(
            f"--revision {loaded.revision!r} cannot be generated: mcptask-gen has no rules "
            f"overlay for it, and {loaded.path} names itself revision {own[0]} (by {own[1]}); "
            f"revisions with rules: {', '.join(overlay_revisions())}"
        )


def _one_shape(loaded: LoadedSchema, found: Found) -> str:
    if found.shape is not None:
        return found.shape
    raise GeneratorError(
        f"{loaded.path} holds task definitions of both known shapes (the 2025-11-25 core "
        "protocol's and the tasks extension's): give the rules overlay to generate it with, "
        f"--rules FILE (format: {FORMAT_DOC})"
    )


def _users(loaded: LoadedSchema, found: Found, user: UserRules) -> Chosen:
    overlay, where = user.overlay, f"--rules {user.path}"
    if overlay.kind not in found.shapes:
        shapes = " and ".join(found.shapes)
        raise GeneratorError(
            f"{where}: its kind is {overlay.kind!r}, but the task definitions of {loaded.path} "
            f"have the {shapes} shape (kind = {found.shapes[0]!r})"
        )
    named = loaded.named_by in (BY_FLAG, BY_ID, BY_LINKS)
    if named and overlay.revision != loaded.revision:
        raise GeneratorError(
            f"{where} is for revision {overlay.revision!r}, but {loaded.path} is revision "
            f"{loaded.revision!r} (named by {loaded.named_by}): make them agree"
        )
    named_by = loaded.named_by if named else where
    chosen = replace(
        loaded,
        revision=overlay.revision,
        overlay=str(user.path),
        named_by=named_by,
        own_rules=False,
    )
    user.used.append(loaded.path)
    return Chosen(chosen, overlay)


def shape_overlay(kind: str) -> tuple[str, Overlay]:
    """(name, overlay) of the newest shipped overlay of ``kind`` (``core``, ``extension``)."""
    shipped = [(load_overlay(name), name) for name in overlay_revisions()]
    same = sorted((o.revision, name, o) for o, name in shipped if o.kind == kind)
    if not same:
        raise GeneratorError(f"mcptask-gen ships no rules overlay of kind {kind!r}")
    _, name, overlay = same[-1]
    return name, overlay


def _supplied(overlay: Overlay) -> str:
    parts = [
        f"the state machine ({len(overlay.lifecycle.transitions)} statuses)",
        f"{len(overlay.errors)} error codes and messages",
        f"{len(overlay.meta)} _meta keys",
        f"the tool-level taskSupport rules ({overlay.tool_task_support.method})",
    ]
    if overlay.extension is not None:
        parts.append("the resultType values and the routing headers")
    return ", ".join(parts)


def _negotiation(rev: str, overlay: Overlay) -> str:
    ext = overlay.extension
    if ext is None:
        return (
            f"how {rev} negotiates tasks (the bindings read the capabilities its schema's "
            f"*Capabilities.tasks declare, as {overlay.revision} does)"
        )
    return (
        f"how {rev} negotiates tasks (the bindings assume the {overlay.revision} extension's: "
        f"{ext.id!r} under extensions in each request's _meta {ext.client_meta_key!r} and in "
        f"the server's {'.'.join(ext.server_capability_path)})"
    )


def _adopted(loaded: LoadedSchema, found: Found) -> Chosen:
    kind = _one_shape(loaded, found)
    name, overlay = shape_overlay(kind)
    rev = loaded.revision
    unnamed = ""
    if loaded.named_by == BY_MARKERS:
        unnamed = (
            f"; the schema names no revision of its own (no dated $id, no /specification/"
            f"<revision>/ link): {rev} is what its marker definitions suggest, so pass "
            "--revision to name it"
        )
    warning = (
        f"{loaded.path} is revision {rev} (named by {loaded.named_by}), which mcptask-gen "
        f"{__version__} has no rules for; its task definitions ({', '.join(found.methods)}) "
        f"have the shape of {_shape_label(kind, overlay)}, whose rules overlay {name} "
        f"supplied {_supplied(overlay)}: check them against the {rev} specification, or give "
        f"your own with --rules FILE ({FORMAT_DOC}); not known: {_negotiation(rev, overlay)}"
        f"{unnamed}"
    )
    chosen = replace(loaded, overlay=name, own_rules=False)
    return Chosen(chosen, overlay, warning=warning)


def choose_rules(loaded: LoadedSchema, user: UserRules | None = None) -> Chosen:
    """The overlay ``loaded`` is generated with (module docstring)."""
    if loaded.overlay in overlay_revisions():
        given = loaded.named_by == BY_FLAG
        return Chosen(loaded, load_overlay(loaded.overlay, given=given, path=loaded.path))
    found = find_tasks(loaded)
    if not found.shapes and not found.methods:
        raise GeneratorError(no_tasks_message(loaded))
    if not found.shapes:
        raise GeneratorError(
            f"{loaded.path} holds task methods ({', '.join(found.methods)}) in neither known "
            "shape (the 2025-11-25 core protocol's: request params with a 'task' member; the "
            "tasks extension's: a create result with the task's members beside a 'resultType' "
            "const): mcptask-gen cannot generate them"
        )
    _refuse_given(loaded, found)
    if user is not None:
        return _users(loaded, found, user)
    return _adopted(loaded, found)
