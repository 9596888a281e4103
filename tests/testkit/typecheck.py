"""``mypy --strict`` for the tests, with one cache for the whole run and the next.

Every type-check of the suite (the generated package, the hand-written templates in place,
other generated outputs, the generator, the README's blocks, a user's install) goes through
:func:`mypy_strict`. They share mypy's incremental cache under ``.mypy_cache/tests`` in the
repository (ignored by git), so the standard library and the dependencies (pydantic, the
``mcp`` SDK, starlette, redis, ...) are analysed once, not once per test, and a second run of
the suite starts warm. Each check holds an exclusive lock on the cache (``flock`` on
``.mypy_cache/tests.lock``) while mypy runs, so no two mypy processes write it at once, whichever
pytest-xdist workers run them; the tests that type-check are marked :data:`TYPECHECK`
(``pytest -m typecheck`` runs them alone).

A check that must not share it (another Python's site-packages: the cache would be rewritten
for that environment's paths) passes its own ``cache_dir``.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
#: the suite's mypy cache, kept between runs
CACHE_DIR = REPO / ".mypy_cache" / "tests"
#: held while mypy writes the suite's cache (one writer at a time, across xdist workers)
CACHE_LOCK = REPO / ".mypy_cache" / "tests.lock"
#: the mark of every type-checking test
TYPECHECK = pytest.mark.typecheck


def mypy_strict(
    *args: str | Path,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    cache_dir: Path | None = None,
    timeout: float = 600,
) -> subprocess.CompletedProcess[str]:
    """``mypy --strict ARGS...`` in ``cwd`` with this environment's mypy, on the suite's
    cache (or ``cache_dir``); its output captured."""
    cache = cache_dir if cache_dir is not None else CACHE_DIR
    cache.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(cache), *map(str, args)]
    # a cache of its own: nobody else writes it; the suite's: one writer at a time
    with nullcontext() if cache_dir is not None else _cache_lock():
        return subprocess.run(
            cmd, cwd=cwd, env=dict(env if env is not None else os.environ),
            capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip


@contextmanager
def _cache_lock() -> Iterator[None]:
    """The suite's cache to this process alone (an exclusive ``flock``, across workers)."""
    with CACHE_LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        yield


def assert_mypy_strict(
    *args: str | Path, cwd: Path, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """:func:`mypy_strict`, which must pass; its result."""
    out = mypy_strict(*args, cwd=cwd, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    return out


def mypy_path_env(path: Path) -> dict[str, str]:
    """This environment with ``MYPYPATH`` set to ``path``."""
    return dict(os.environ, MYPYPATH=str(path))
