"""FastMCP 4 (``fastmcp-tasks``) as a peer we did not write, in a virtualenv of its own.

FastMCP 4 serves the 2026-07-28 tasks extension (``io.modelcontextprotocol/tasks``) and
nothing of 2025-11-25 tasks; it pins many dependencies (Docket, redis-py 8, ...), so it
never shares our ``.venv``. :func:`ensure_venv` creates ``tests/interop/.venv-fastmcp``
(gitignored) on demand with exactly :data:`PINS` (plus what they need), and reuses it while
its stamp matches (the pins and the Python version). Creating it takes about a minute and
needs the package registry; :func:`peer_python` turns "cannot install" into a pytest skip,
or a failure under ``CI``. Standard library only: ``benchmarks/peers_bench.py`` uses it too.

Scripts run with the venv's Python: ``fastmcp_server.py PORT`` (a FastMCP tasks server with
the example server's tool contract) and ``fastmcp_client.py URL`` (the FastMCP client
driving a server's tools; prints one JSON object).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: The peer's virtualenv, beside the interop tests (gitignored).
VENV = HERE.parent / "interop" / ".venv-fastmcp"
#: Run by path with the venv's Python: they import FastMCP and nothing of this suite.
SERVER_SCRIPT = HERE / "fastmcp_server.py"
CLIENT_SCRIPT = HERE / "fastmcp_client.py"
#: What the peer is: FastMCP 4.1.4 with its tasks extension, on the mcp SDK we use.
PINS = ("fastmcp==4.1.4", "fastmcp-tasks==4.1.4", "mcp==2.3.0")
STAMP_NAME = ".mcptask-pins"
INSTALL_TIMEOUT_S = 900


class PeerUnavailable(RuntimeError):
    """The FastMCP virtualenv could not be created (no registry, no wheel, ...)."""


def venv_python(venv: Path = VENV) -> Path:
    return venv / "bin" / "python"


def _wanted() -> str:
    return " ".join(PINS) + f" python{platform.python_version()}\n"


def is_ready(venv: Path = VENV) -> bool:
    """The venv exists and holds exactly :data:`PINS` (by its stamp)."""
    stamp = venv / STAMP_NAME
    return venv_python(venv).exists() and stamp.is_file() and stamp.read_text() == _wanted()


@contextlib.contextmanager
def _lock(venv: Path) -> Iterator[None]:
    """Test sessions and benchmarks on this checkout may want the venv at the same time."""
    key = hashlib.sha256(str(venv).encode()).hexdigest()[:16]
    with open(Path(tempfile.gettempdir()) / f"mcptask-fastmcp-{key}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _run(argv: list[str]) -> None:
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
    try:
        out = subprocess.run(
            argv, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, env=env
        )
    except subprocess.TimeoutExpired as exc:
        raise PeerUnavailable(f"{' '.join(argv)}: timed out after {exc.timeout}s") from None
    if out.returncode != 0:
        tail = (out.stdout + out.stderr)[-3000:]
        raise PeerUnavailable(f"{' '.join(argv)} failed ({out.returncode}):\n{tail}")


def ensure_venv(venv: Path = VENV) -> Path:
    """The venv's Python, after creating or refreshing the venv when needed."""
    with _lock(venv):
        if is_ready(venv):
            return venv_python(venv)
        (venv / STAMP_NAME).unlink(missing_ok=True)
        _run([sys.executable, "-m", "venv", "--clear", str(venv)])
        _run([str(venv_python(venv)), "-m", "pip", "install", "-q", *PINS])
        (venv / STAMP_NAME).write_text(_wanted())
        return venv_python(venv)


def peer_python() -> Path:
    """For tests: :func:`ensure_venv`, a skip when it cannot be made, a failure under CI."""
    import pytest

    try:
        return ensure_venv()
    except PeerUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI: the FastMCP peer venv is required: {exc}")
        pytest.skip(f"FastMCP peer unavailable (no package registry?): {exc}")
