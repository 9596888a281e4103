"""A content-addressed cache for the two expensive, pure steps: datamodel-code-generator's
models and black's formatting.

Keys are sha256 digests of everything that determines the output (tool version, options,
input text), so a hit is byte-identical to a fresh run; a corrupt or unreadable entry is a
miss. Location: ``$MCPTASK_GEN_CACHE_DIR``, else ``$XDG_CACHE_HOME/mcptask-gen``, else
``~/.cache/mcptask-gen``. ``MCPTASK_GEN_NO_CACHE=1`` (or ``--no-cache``) turns it off.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

_disabled = False


@contextlib.contextmanager
def off() -> Iterator[None]:
    """The cache off inside the block (``--no-cache``) and as it was after it: a run in a
    process that goes on (a test, a tool calling the CLI's ``main``) leaves the next one
    its cache."""
    global _disabled
    before, _disabled = _disabled, True
    try:
        yield
    finally:
        _disabled = before


def directory() -> Path | None:
    if _disabled or os.environ.get("MCPTASK_GEN_NO_CACHE"):
        return None
    root = os.environ.get("MCPTASK_GEN_CACHE_DIR")
    if root:
        return Path(root)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "mcptask-gen"


def enabled() -> bool:
    return directory() is not None


def key(*parts: str) -> str:
    h = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8")
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)
    return h.hexdigest()


def get(kind: str, digest: str) -> str | None:
    root = directory()
    if root is None:
        return None
    path = root / kind / digest[:2] / digest
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    # Entries end with their own digest line, so a truncated write is a miss, not bad output.
    body, sep, tail = text.rpartition("\n#mcptask-gen-cache ")
    return body if sep and tail == digest else None


def put(kind: str, digest: str, text: str) -> None:
    root = directory()
    if root is None:
        return
    path = root / kind / digest[:2] / digest
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(f"{text}\n#mcptask-gen-cache {digest}")
        os.replace(tmp, path)
    except OSError:
        return  # a cache that cannot be written is only a slower run
