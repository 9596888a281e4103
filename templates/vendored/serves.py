"""Which generated packages this runtime serves, and under which rules: the one home of that
rule, asked by the runtime when it is given a handler (``runtime.bindings.adopt``) and by
``mcptask-gen`` when it writes a package and this runtime is installed (:func:`verdict`), so
that a package the runtime cannot serve is named when it is written, not first at deploy.

Light on purpose: it imports only this package's ``descriptor`` (the generator asks it in the
middle of a run: no engine, no ``mcp`` SDK).

A package is served when its ``RUNTIME_REQUIRES`` accepts this runtime's version and its
``BINDINGS_API`` is this runtime's; then each of its faces is served when it speaks a revision
this runtime serves, or a revision this runtime does not know in a shape it does: a face of
the same kind (``core``, or ``extension`` with the same extension identifier). Such a face is
served under the rules of this runtime's face of that kind, the rules the generator generated
it with (a revision it does not know is generated with its shape's rules overlay), and
the runtime says so in one line when it starts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Final

from . import descriptor as own

__all__ = [
    "DISTRIBUTION",
    "FaceVerdict",
    "Verdict",
    "accepts",
    "runtime",
    "verdict",
    "verdict_of",
    "version",
]

#: the runtime's distribution (``mcptask-runtime``), from the requirement it writes
DISTRIBUTION: Final = re.split(r"[<>=!~ \[;]", own.RUNTIME_REQUIRES, maxsplit=1)[0]
_CLAUSE = re.compile(r"\s*(>=|<=|==|!=|<|>)\s*(\d+(?:\.\d+)*)[^,]*")


def _release(version: str) -> tuple[int, ...]:
    """The release numbers of ``version`` (``0.1.0`` -> (0, 1, 0)), zero-padded to three."""
    found = re.match(r"\d+(?:\.\d+)*", version.strip())
    numbers = tuple(int(n) for n in found[0].split(".")) if found else ()
    return (numbers + (0, 0, 0))[: max(3, len(numbers))]


def accepts(requirement: str, version: str) -> bool:
    """Whether ``version`` meets the bounds of ``requirement`` (a requirement line such as
    ``mcptask-runtime>=0.1.0,<0.2``; only release numbers compare)."""
    spec = re.split(r"[<>=!]", requirement, maxsplit=1)
    clauses = requirement[len(spec[0]) :].split(",") if len(spec) == 2 else []
    have = _release(version)
    for clause in clauses:
        found = _CLAUSE.fullmatch(clause)
        if found is None:
            return False
        op, bound = found[1], _release(found[2])
        ok = {
            ">=": have >= bound,
            "<=": have <= bound,
            "==": have == bound,
            "!=": have != bound,
            "<": have < bound,
            ">": have > bound,
        }[op]
        if not ok:
            return False
    return True


def version() -> str:
    """This runtime's distribution and version (``mcptask-runtime 0.1.0``)."""
    return f"{DISTRIBUTION} {own.GENERATOR_VERSION}"


def runtime() -> str:
    """This runtime, in the words of a refusal: its version, bindings API and revisions."""
    revisions = ", ".join(sorted(own.FACES))
    return (
        f"this runtime ({own.GENERATOR} {own.GENERATOR_VERSION}, bindings API"
        f" {own.BINDINGS_API}) serves revisions {revisions}"
    )


def _shape(kind: str, extension: str | None) -> str:
    return (
        f"the tasks extension {extension}" if kind == "extension" else "the core protocol's tasks"
    )


@dataclass(frozen=True)
class FaceVerdict:
    """One face of a package: the revision it speaks, the revision of this runtime's face
    whose rules serve it (None: none can), and in one line what applies or why not."""

    revision: str
    rules: str | None
    line: str

    @property
    def as_is(self) -> bool:
        """Served as the revision it speaks (no line to say at start)."""
        return self.rules == self.revision


@dataclass(frozen=True)
class Verdict:
    """What this runtime does with a package: ``refused`` (why it serves none of it, in one
    line) or each face's verdict."""

    refused: str | None
    faces: tuple[FaceVerdict, ...]

    def problem(self) -> str | None:
        """Why this runtime cannot serve the whole package, in one line (None: it can)."""
        if self.refused is not None:
            return self.refused
        lines = [f.line for f in self.faces if f.rules is None]
        return "; ".join(lines) if lines else None


def _face(revision: str, kind: str, extension: str | None) -> FaceVerdict:
    mine = own.FACES.get(revision)
    if mine is not None and (mine.kind, mine.extension) == (kind, extension):
        return FaceVerdict(revision, revision, f"revision {revision} is served as it is")
    if mine is not None:
        return FaceVerdict(
            revision,
            None,
            f"its revision {revision} is {_shape(kind, extension)}, but this runtime's"
            f" {revision} is {_shape(mine.kind, mine.extension)}",
        )
    same = sorted(r for r, f in own.FACES.items() if (f.kind, f.extension) == (kind, extension))
    if not same:
        return FaceVerdict(
            revision,
            None,
            f"its revision {revision} is {_shape(kind, extension)}, which {runtime()} has no"
            " face of",
        )
    rules = same[-1]  # the newest of that shape
    return FaceVerdict(
        revision,
        rules,
        f"revision {revision}, which this runtime ({version()}) does not know, is served with the rules of its revision {rules}"
        f" ({_shape(kind, extension)}, the shape it has): check them against the"
        f" {revision} specification, or install a runtime that knows it",
    )


def verdict(
    faces: Iterable[tuple[str, str, str | None]],
    bindings_api: object,
    runtime_requires: object,
    name: str = "the package",
) -> Verdict:
    """This runtime's verdict on a package ``name`` whose faces are ``(revision, kind,
    extension identifier or None)``, built on ``bindings_api`` and accepting the runtime
    versions of ``runtime_requires``."""
    if isinstance(runtime_requires, str) and not accepts(runtime_requires, own.GENERATOR_VERSION):
        return Verdict(
            f"{name} needs {runtime_requires}; this runtime is {DISTRIBUTION}"
            f" {own.GENERATOR_VERSION}: install one {name} accepts, or regenerate {name} with"
            f" {own.GENERATOR} {own.GENERATOR_VERSION}",
            (),
        )
    if bindings_api != own.BINDINGS_API:
        return Verdict(
            f"{name} is built on bindings API {bindings_api}; {runtime()}: regenerate {name}"
            f" with {own.GENERATOR} {own.GENERATOR_VERSION}",
            (),
        )
    return Verdict(None, tuple(_face(*face) for face in faces))


def verdict_of(descriptor: ModuleType, name: str) -> Verdict:
    """:func:`verdict` on a generated package's ``descriptor`` module."""
    faces = getattr(descriptor, "FACES", {})
    return verdict(
        ((str(r), str(f.kind), f.extension) for r, f in faces.items()),
        getattr(descriptor, "BINDINGS_API", None),
        getattr(descriptor, "RUNTIME_REQUIRES", None),
        name,
    )
