"""format: black, pinned range, explicit Mode, never the user's configuration.

All sources are formatted in one process through black's API (the pipeline runs
datamodel-code-generator in a forked child meanwhile, see ``background``). Formatted text
is cached by content (``cache``), so an unchanged input is never formatted twice.
"""

from __future__ import annotations

from mcptask_gen import cache
from mcptask_gen.errors import GeneratorError

LINE_LENGTH = 100
#: Everything that determines black's output besides its version and the input text.
MODE_KEY = f"py311 line_length={LINE_LENGTH} string_normalization magic_trailing_comma stable"


def _mode() -> object:
    import black

    return black.Mode(
        target_versions={black.TargetVersion.PY311},
        line_length=LINE_LENGTH,
        string_normalization=True,
        is_pyi=False,
        magic_trailing_comma=True,
        preview=False,
    )


def _digest(text: str) -> str:
    from importlib.metadata import version

    return cache.key(f"black {version('black')}", MODE_KEY, text)


def _needs_format(rel: str, skip: set[str] | frozenset[str]) -> bool:
    return rel.endswith(".py") and rel not in skip


def format_sources(
    files: dict[str, str], skip: set[str] | frozenset[str] = frozenset()
) -> dict[str, str]:
    """Format every Python source not in ``skip``; other files pass through unchanged."""
    out: dict[str, str] = {}
    misses: dict[str, str] = {}
    cached = cache.enabled()
    for rel, text in sorted(files.items()):
        if not _needs_format(rel, skip):
            out[rel] = text
            continue
        hit = cache.get("black", _digest(text)) if cached else None
        if hit is None:
            misses[rel] = text
        else:
            out[rel] = hit
    if misses:
        import black

        mode = _mode()
        for rel, text in misses.items():
            try:
                out[rel] = black.format_str(text, mode=mode)
            except black.InvalidInput as exc:
                raise GeneratorError(
                    f"rendered {rel} is not valid Python ({exc}); check the template that produced it"
                ) from None
            if cached:
                cache.put("black", _digest(text), out[rel])
    return dict(sorted(out.items()))
