"""Where the schema comes from: a path, a URL, or (``--revision REV`` without a schema) the
official schema of a revision.

By revision, the schema is the official file mcptask-gen ships for it (``mcptask_gen.pinned``:
offline, the same bytes every time). ``--fetch`` fetches what is published now instead, from
the GitHub repository that publishes it, read through its raw files
(``$MCPTASK_GEN_RAW_FILES_URL/<owner>/<repo>/main/<path>``, ``https://raw.githubusercontent.com``
by default): the core protocol's in the MCP specification repository,
``modelcontextprotocol/modelcontextprotocol``, under ``schema/<revision>/schema.json``
(``$MCPTASK_GEN_SCHEMA_BASE_URL/<revision>/schema.json`` when that is set); an extension's in
its own repository, at the ``source`` its entry in ``schema/revisions.toml`` gives (the tasks
extension's release: ``modelcontextprotocol/ext-tasks/main/schema/2026-07-28/schema.json``).
A fetched schema (by URL or by ``--fetch``) is stored by content in the cache directory
(``schemas/<sha256>/schema.json``); every run fetches again (a published schema may be
edited), and when its host cannot be reached the copy that URL gave last answers, with one
line saying so. ``--no-cache`` keeps nothing. stdlib ``urllib`` with a time-out and a size
limit; every failure is one line (exit 2).
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import socket
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from mcptask_gen import cache
from mcptask_gen.errors import GeneratorError
from mcptask_gen.load import MAX_SCHEMA_BYTES, revision_entry
from mcptask_gen.pinned import pinned

#: The raw files of GitHub repositories (``<owner>/<repo>/<branch>/<path>`` under it).
RAW_FILES_ENV = "MCPTASK_GEN_RAW_FILES_URL"
RAW_FILES_URL = "https://raw.githubusercontent.com"
#: The specification repository's schema directory, under the raw-files base.
SPEC_SCHEMAS = "modelcontextprotocol/modelcontextprotocol/main/schema"
#: Replaces ``RAW_FILES/SPEC_SCHEMAS`` for the core protocol's schemas.
BASE_URL_ENV = "MCPTASK_GEN_SCHEMA_BASE_URL"
OFFICIAL_BASE_URL = f"{RAW_FILES_URL}/{SPEC_SCHEMAS}"
TIMEOUT_S = 30.0


def is_url(text: str) -> bool:
    return text.startswith(("http://", "https://"))


def official_source(revision: str) -> str | None:
    """Where the official schema of ``revision`` (a revision, or an overlay name such as
    ``2026-07-28-tasks``) lives under the raw-files base, when ``revisions.toml`` says
    (``source``: an extension's own repository); None: the specification repository's
    ``schema/<revision>/schema.json``."""
    hit = revision_entry(revision)
    source = hit.get("source") if hit is not None else None
    return str(source) if source else None


def official_url(revision: str) -> str:
    raw = (os.environ.get(RAW_FILES_ENV) or RAW_FILES_URL).rstrip("/")
    source = official_source(revision)
    if source is not None:
        return f"{raw}/{source}"
    base = os.environ.get(BASE_URL_ENV) or f"{raw}/{SPEC_SCHEMAS}"
    return f"{base.rstrip('/')}/{revision}/schema.json"


class _Unreachable(GeneratorError):
    """The host could not be reached (a stored copy may answer instead)."""


def _download(url: str) -> bytes:
    request = urllib.request.Request(url, headers={"User-Agent": "mcptask-gen"})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            raw: bytes = response.read(MAX_SCHEMA_BYTES + 1)
    except urllib.error.HTTPError as exc:
        raise GeneratorError(f"cannot fetch {url}: HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, (TimeoutError, socket.timeout)):
            raise GeneratorError(f"cannot fetch {url}: timed out after {TIMEOUT_S:g} s") from None
        text = getattr(reason, "strerror", None) or str(reason)
        raise _Unreachable(f"cannot fetch {url}: {text}") from None
    except TimeoutError:
        raise GeneratorError(f"cannot fetch {url}: timed out after {TIMEOUT_S:g} s") from None
    except (OSError, ValueError) as exc:
        raise GeneratorError(f"cannot fetch {url}: {exc}") from None
    if len(raw) > MAX_SCHEMA_BYTES:
        raise GeneratorError(f"cannot fetch {url}: larger than {MAX_SCHEMA_BYTES} bytes")
    try:
        json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise GeneratorError(f"{url} did not return JSON (is it a schema.json address?)") from None
    return raw


def _store(root: Path, raw: bytes) -> Path:
    digest = hashlib.sha256(raw).hexdigest()
    path = root / digest / "schema.json"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
        os.replace(tmp, path)
    return path


def _remembered(root: Path, url: str) -> Path | None:
    """The stored schema a URL gave before, when it is intact."""
    index = root / "by-url" / hashlib.sha256(url.encode("utf-8")).hexdigest()
    try:
        digest = index.read_text(encoding="ascii").strip()
        path = root / digest / "schema.json"
        if hashlib.sha256(path.read_bytes()).hexdigest() == digest:
            return path
    except (OSError, UnicodeDecodeError):
        pass
    return None


#: Where a line for the user goes (the command prints it on stderr).
Say = Callable[[str], None]


def _quiet(message: str) -> None:
    pass


def _stored_on(path: Path) -> str:
    try:
        when = datetime.fromtimestamp(path.stat().st_mtime, UTC)
    except OSError:
        return "before"
    return f"on {when:%Y-%m-%d %H:%M} UTC"


def fetch(url: str, say: Say = _quiet) -> Path:
    """A local file holding the schema at ``url`` (the cache, else a temporary directory);
    when the host cannot be reached, the copy ``url`` gave last, ``say`` telling so."""
    root = cache.directory()
    if root is None:
        tmp = Path(tempfile.mkdtemp(prefix="mcptask-gen-schema-"))
        atexit.register(shutil.rmtree, tmp, ignore_errors=True)
        return _store(tmp, _download(url))
    schemas = root / "schemas"
    try:
        raw = _download(url)
    except _Unreachable as exc:
        hit = _remembered(schemas, url)
        if hit is None:
            raise GeneratorError(str(exc)) from None
        say(
            f"{exc}; using the copy fetched {_stored_on(hit)} "
            f"(sha256 {hit.parent.name[:12]}), which may be out of date"
        )
        return hit
    try:
        path = _store(schemas, raw)
        index = schemas / "by-url" / hashlib.sha256(url.encode("utf-8")).hexdigest()
        index.parent.mkdir(parents=True, exist_ok=True)
        index.write_text(path.parent.name, encoding="ascii")
        return path
    except OSError:  # a cache that cannot be written: use a temporary copy
        tmp = Path(tempfile.mkdtemp(prefix="mcptask-gen-schema-"))
        atexit.register(shutil.rmtree, tmp, ignore_errors=True)
        return _store(tmp, raw)


@dataclass(frozen=True)
class Resolved:
    """A schema to read: its local file, and the URL it was fetched from (None: a local file
    or a pinned copy)."""

    path: Path
    url: str | None = None


def resolve(
    schema: str | Path | None, revision: str | None, *, published: bool = False, say: Say = _quiet
) -> Resolved:
    """The schema file to read: a path as is, a URL fetched, or (no schema, a revision) the
    official schema of that revision: the copy mcptask-gen ships, or (``published``, the
    command's ``--fetch``) the one published now."""
    if schema is None:
        if revision is None:
            raise GeneratorError(
                "missing SCHEMA: give the MCP schema.json path or URL (or schema in "
                "[tool.mcptask-gen]), or --revision REV to generate from the official schema "
                "mcptask-gen ships for it"
            )
        if not published:
            return Resolved(pinned(revision).file)
        url = official_url(revision)
        return Resolved(fetch(url, say), url)
    if isinstance(schema, str) and is_url(schema):
        return Resolved(fetch(schema, say), schema)
    return Resolved(Path(schema))
