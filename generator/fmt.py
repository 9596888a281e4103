"""format: black, pinned range, explicit Mode, never the user's configuration."""

from __future__ import annotations

from mcptask_gen.errors import GeneratorError

LINE_LENGTH = 100


def format_sources(files: dict[str, str]) -> dict[str, str]:
    """Format every Python source in one pass through black's API (no config lookup)."""
    import black

    mode = black.Mode(
        target_versions={black.TargetVersion.PY311},
        line_length=LINE_LENGTH,
        string_normalization=True,
        is_pyi=False,
        magic_trailing_comma=True,
        preview=False,
    )
    out: dict[str, str] = {}
    for rel, text in sorted(files.items()):
        if not rel.endswith(".py"):
            out[rel] = text
            continue
        try:
            out[rel] = black.format_str(text, mode=mode)
        except black.InvalidInput as exc:
            raise GeneratorError(f"rendered {rel} is not valid Python ({exc}); check the template that produced it") from None
    return out
