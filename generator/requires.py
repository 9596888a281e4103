"""What a generated package needs installed, by part, as requirement lines with the version
ranges this distribution was tested with (its own metadata: ``pyproject.toml``'s
dependencies and extras, the one home of every pin).

- ``bindings``: every package (the models, tables and bases): pydantic and anyio;
- the vendored runtime's parts (``--with-runtime``), one per extra of this distribution:
  ``runtime`` (the ``mcp`` extra: the SDK and the HTTP server), ``redis``, ``ops``, ``workers``.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import metadata

from mcptask_gen.errors import GeneratorError

DISTRIBUTION = "mcptask-gen"
#: the distribution's own dependencies a package of bindings needs (the rest run the generator)
BINDINGS_NEEDS = ("pydantic", "anyio")
#: part of a vendored runtime -> the extra of this distribution it needs
PART_EXTRAS = {"runtime": "mcp", "redis": "redis", "ops": "ops", "workers": "workers"}

_EXTRA = re.compile(r"""\s*(?:and\s+)?extra\s*==\s*["']([a-z0-9_-]+)["']""")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _split(line: str) -> tuple[str, str | None, str]:
    """(requirement without the extra clause, the extra or None, the distribution name)."""
    req, _, marker = line.partition(";")
    extra = None
    found = _EXTRA.search(marker)
    if found:
        extra = found[1]
        marker = (marker[: found.start()] + marker[found.end() :]).strip()
        if marker.startswith("(") and marker.endswith(")"):
            marker = marker[1:-1].strip()
    name = _NAME.match(req.strip())
    if name is None:
        raise GeneratorError(f"cannot read the requirement {line!r} of {DISTRIBUTION}")
    text = req.strip() + (f"; {marker.strip()}" if marker.strip() else "")
    return text, extra, name[0].lower().replace("_", "-")


@cache
def requirements() -> dict[str, tuple[str, ...]]:
    """Part -> its requirement lines (sorted), from this distribution's metadata."""
    try:
        lines = metadata.requires(DISTRIBUTION) or []
    except metadata.PackageNotFoundError:
        raise GeneratorError(f"{DISTRIBUTION} is not installed: install it with pip") from None
    base: list[str] = []
    extras: dict[str, list[str]] = {}
    for line in lines:
        text, extra, name = _split(line)
        if extra is None:
            if name in BINDINGS_NEEDS:
                base.append(text)
        else:
            extras.setdefault(extra, []).append(text)

    def expand(extra: str, seen: frozenset[str] = frozenset()) -> list[str]:
        out: list[str] = []
        for text in extras.get(extra, []):
            inner = re.fullmatch(rf"{DISTRIBUTION}\[([a-z0-9_,-]+)\]", text.split(";")[0].strip())
            if inner:
                for name in inner[1].split(","):
                    if name not in seen:
                        out += expand(name, seen | {extra})
            else:
                out.append(text)
        return out

    out = {"bindings": tuple(sorted(set(base)))}
    for part, extra in PART_EXTRAS.items():
        out[part] = tuple(sorted(set(expand(extra))))
    return out
