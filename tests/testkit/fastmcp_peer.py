"""FastMCP 4 (``fastmcp-tasks``) as a peer we did not write, in a virtualenv of its own.

FastMCP 4 serves the 2026-07-28 tasks extension (``io.modelcontextprotocol/tasks``) and
nothing of 2025-11-25 tasks; it pins many dependencies (Docket, redis-py 8, ...), so it
never shares our ``.venv``. :func:`ensure_venv` creates ``tests/interop/.venv-fastmcp``
(gitignored) with exactly :data:`PINS` (plus what they need), and reuses it while its stamp
matches (the pins and the Python version). Creating it takes about a minute and needs the
package registry: ``tests/install_peers.py`` does it before the suite, and
:func:`peer_python` gives the tests a skip (a failure under ``CI``) while it is missing.
Standard library only: ``benchmarks/peers_bench.py`` uses it too.

Scripts run with the venv's Python, in :func:`peer_env`: ``fastmcp_server.py PORT`` (a FastMCP tasks server with
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


def peer_env() -> dict[str, str]:
    """This process's environment for the peer's scripts, without ``PYTHONPATH``: the peer
    runs its venv's pins (``.ci/run`` puts the oldest ``mcp`` there for our side only)."""
    return {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}


def peer_python() -> Path:
    """For tests: the venv's Python when it is ready (``tests/install_peers.py`` makes it
    before the suite; no test installs), else a skip, or a failure under ``CI``."""
    from testkit.interop import require_peer

    require_peer(is_ready(), "the FastMCP peer venv tests/interop/.venv-fastmcp")
    return venv_python()
