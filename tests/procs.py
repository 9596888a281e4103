"""Subprocess servers in tests: wait until one listens on 127.0.0.1, stop one by its PID."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path


def wait_listening(
    proc: subprocess.Popen[bytes], port: int, log_path: Path, timeout: float, what: str = "server"
) -> None:
    """Return once ``proc`` accepts connections on ``port``; stop it and raise with its log if it
    exits first or does not listen within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited early:\n{log_path.read_text(errors='replace')}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    stop_process(proc)
    raise RuntimeError(f"{what} did not start:\n{log_path.read_text(errors='replace')}")


def stop_process(proc: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM by PID, then SIGKILL if it has not exited within 15 s."""
    if proc is None or proc.poll() is not None:
        return
    os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=15)
