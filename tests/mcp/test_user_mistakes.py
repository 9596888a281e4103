"""A user's mistake gets one line naming what is wrong (and the fix) and exit 2, never a
traceback: the example server's flags, ``mcptask``'s targets, a missing ``mcp`` SDK.

Every case runs the real command as a subprocess and reads its stderr and exit status."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from testkit.example_server import SERVER_MODULE
from testkit.procs import free_port, python_env, refusing_port

#: what a traceback always prints; a one-line answer never does
TRACEBACK = "Traceback (most recent call last)"


def run(argv: list[str], timeout: float = 120, **kw: Any) -> subprocess.CompletedProcess[str]:
    kw.setdefault("stdin", subprocess.DEVNULL)
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, env=python_env(), **kw
    )


def server(*args: str) -> subprocess.CompletedProcess[str]:
    return run([sys.executable, "-m", SERVER_MODULE, *args])


def mcptask(*args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    return run([sys.executable, "-m", "mcp_tasks.cli", *args], **kw)


def assert_one_line(out: subprocess.CompletedProcess[str], *words: str) -> str:
    """Exit 2, nothing on stdout, one line on stderr holding each of ``words``."""
    assert out.returncode == 2, out.stderr
    assert TRACEBACK not in out.stderr, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    for word in words:
        assert word in lines[0], out.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--store", "bogus"], ["--store 'bogus'", "memory:", "sqlite:PATH", "redis://"]),
        (["--store", "sqlite:/nonexistent/dir/x.db"], ["/nonexistent/dir", "does not exist"]),
        (["--store", "sqlite:"], ["sqlite:PATH"]),
        (["--tokens", "/nonexistent/tokens.json"], ["--tokens", "No such file"]),
    ],
)
def test_a_bad_server_flag_is_one_line(args: list[str], words: list[str]) -> None:
    assert_one_line(server("--http", f"127.0.0.1:{free_port()}", *args), "error:", *words)


@pytest.mark.parametrize("value", ["nonsense", "127.0.0.1:http", "127.0.0.1:70000"])
def test_a_bad_http_address_is_one_line(value: str) -> None:
    assert_one_line(server("--http", value), "--http", "HOST:PORT", repr(value))


@pytest.mark.parametrize(
    ("text", "word"), [("not json", "not JSON"), ('["a"]', "token -> subject")]
)
def test_a_bad_tokens_file_is_one_line(tmp_path: Path, text: str, word: str) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(text)
    out = server("--http", f"127.0.0.1:{free_port()}", "--tokens", str(tokens))
    assert_one_line(out, str(tokens), word)


def test_an_unreachable_redis_stops_the_start_and_the_flag_starts_anyway() -> None:
    """The store is read once before serving: a Redis nobody listens on exits 2 saying what
    to do (the store's own log line names the address); ``--no-store-check`` serves."""
    with refusing_port() as redis_port:
        url = f"redis://127.0.0.1:{redis_port}/0"
        out = server("--http", f"127.0.0.1:{free_port()}", "--store", url)
    assert out.returncode == 2 and TRACEBACK not in out.stderr, out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert url in last and "does not answer" in last and "--no-store-check" in last
    assert len(out.stderr.strip().splitlines()) <= 2, out.stderr
    # with the flag it serves (over stdio: EOF ends it at once, exit 0)
    anyway = run(
        [sys.executable, "-m", SERVER_MODULE, "--stdio", "--store", url, "--no-store-check"]
    )
    assert anyway.returncode == 0, anyway.stderr


def test_mcptask_without_a_listening_server_is_one_line() -> None:
    with refusing_port() as port:
        url = f"http://127.0.0.1:{port}/mcp"
        assert_one_line(mcptask("call", url, "crunch", "n=1"), "cannot connect", url, "running")


def test_mcptask_with_a_target_that_is_neither_url_nor_command_is_one_line() -> None:
    assert_one_line(mcptask("tasks", "list", "notaurl"), "'notaurl'", "http(s)://", "command")


def test_mcptask_usage_mistakes_are_one_line() -> None:
    assert_one_line(mcptask("tasks", "list"), "target", "--help")
    assert_one_line(mcptask("call", "x", "y", "--answer", "nope"), "key=value", "'nope'")


#: a Python whose ``mcp`` and ``mcp_types`` cannot be imported, as after ``pip install .``
#: without the ``mcp`` extra, then the code given
WITHOUT_SDK = "import sys; sys.modules['mcp'] = sys.modules['mcp_types'] = None; "


def test_a_missing_sdk_names_the_extra() -> None:
    cli = run([sys.executable, "-c", WITHOUT_SDK + "from mcp_tasks.cli import main; main()"])
    assert_one_line(cli, "mcptask:", "mcp SDK", "pip install", "'./generated[mcp]'")
    serve = run(
        [
            sys.executable,
            "-c",
            WITHOUT_SDK + "import runpy; sys.argv[1:] = ['--stdio'];"
            f" runpy.run_module({SERVER_MODULE!r}, run_name='__main__', alter_sys=True)",
        ]
    )
    assert_one_line(serve, SERVER_MODULE, "mcp SDK", "pip install")
    imported = run([sys.executable, "-c", WITHOUT_SDK + "import mcp_tasks.runtime.serve.server"])
    assert imported.returncode == 1
    assert (
        imported.stderr.strip()
        .splitlines()[-1]
        .startswith(
            "ModuleNotFoundError: the mcp SDK is not installed (the 'mcp' extra): pip install"
        )
    )
    # the engine and the stores need no SDK
    engine = run([sys.executable, "-c", WITHOUT_SDK + "from mcp_tasks.runtime import TaskEngine"])
    assert engine.returncode == 0, engine.stderr
