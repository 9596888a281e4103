"""What the benchmark runs read and do on this machine, for ``peers_bench.py`` and
``scaleout.py`` alike: free ports on 127.0.0.1, a process's CPU and RSS from ``/proc``,
stopping a process by PID, a throw-away ``redis-server`` and its RESP commands, percentiles.

Standard library only.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess

HOST = "127.0.0.1"
TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (``/proc/PID/stat``; OSError once it is gone)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * TICK_S  # utime + stime


def rss_bytes(pid: int) -> int:
    """Resident set size of a process (``VmRSS`` of ``/proc/PID/status``)."""
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def stop(proc: subprocess.Popen[bytes] | None, grace_s: float = 5.0) -> None:
    """SIGTERM by PID; SIGKILL when it has not ended within ``grace_s``."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(grace_s)


def redis_argv(port: int) -> list[str]:
    """A throw-away ``redis-server`` on ``HOST:port``: no persistence."""
    return ["redis-server", "--port", str(port), "--bind", HOST, "--save", "", "--appendonly", "no"]


async def redis_command(port: int, *command: str) -> bytes:
    """One RESP command to the redis-server on ``HOST:port``; its first reply line."""
    reader, writer = await asyncio.open_connection(HOST, port)
    try:
        parts = [f"*{len(command)}\r\n".encode()]
        for arg in command:
            parts.append(f"${len(arg.encode())}\r\n{arg}\r\n".encode())
        writer.write(b"".join(parts))
        return await reader.readline()
    finally:
        writer.close()


async def redis_commands_ran(port: int) -> int:
    """How many commands the redis-server on ``HOST:port`` ran since it started or its
    stats were reset (``INFO commandstats``, those run inside scripts too), less the
    ``INFO`` calls themselves."""
    reader, writer = await asyncio.open_connection(HOST, port)
    try:
        writer.write(b"*2\r\n$4\r\nINFO\r\n$12\r\ncommandstats\r\n")
        size = int((await reader.readline())[1:])
        body = (await reader.readexactly(size + 2)).decode()
    finally:
        writer.close()
    total = 0
    for line in body.splitlines():
        if line.startswith("cmdstat_") and not line.startswith("cmdstat_info:"):
            total += int(line.split("calls=", 1)[1].split(",", 1)[0])
    return total


def pct(values: list[float], q: float) -> float:
    """The ``q``-th percentile of ``values`` (nearest rank; NaN for none)."""
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q / 100 * (len(s) - 1))))]
