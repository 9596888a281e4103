"""format: black, pinned range, explicit Mode, never the user's configuration.

All sources are formatted in one process through black's API. On machines with
``fork``, the template outputs are formatted in a forked worker while the parent
runs datamodel-code-generator, so the two costs overlap. Formatted text is cached by
content (``cache``), so an unchanged input is never formatted twice.
"""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from importlib.metadata import version

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
    return cache.key(f"black {version('black')}", MODE_KEY, text)


def _needs_format(rel: str, skip: set[str] | frozenset[str]) -> bool:
    return rel.endswith(".py") and rel not in skip


def format_sources(
    files: dict[str, str], skip: set[str] | frozenset[str] = frozenset()
) -> dict[str, str]:
    """Format every Python source not in ``skip``; other files pass through unchanged."""
    out: dict[str, str] = {}
    misses: dict[str, str] = {}
    for rel, text in sorted(files.items()):
        if not _needs_format(rel, skip):
            out[rel] = text
            continue
        hit = cache.get("black", _digest(text))
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
            cache.put("black", _digest(text), out[rel])
    return dict(sorted(out.items()))


def format_overlapped(
    files: dict[str, str], skip: set[str], work: Callable[[], dict[str, str]]
) -> dict[str, str]:
    """Format ``files`` while ``work()`` runs; then format what ``work`` returned. Same result as
    formatting everything in sequence."""
    misses = [
        rel
        for rel, text in files.items()
        if _needs_format(rel, skip) and cache.get("black", _digest(text)) is None
    ]
    can_fork = "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1
    if not misses or not can_fork:
        formatted = format_sources(files, skip)
        return formatted | format_sources(work())
    import black  # noqa: F401  (imported before forking so the worker inherits it)

    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("fork")) as pool:
        future: Future[dict[str, str]] = pool.submit(format_sources, files, skip)
        extra = format_sources(work())
        formatted = future.result()
    return formatted | extra
