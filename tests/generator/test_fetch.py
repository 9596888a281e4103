"""The schema may be a URL, and ``--revision REV`` alone fetches the official schema of that
revision (``$MCPTASK_GEN_SCHEMA_BASE_URL/<rev>/schema.json``), stored by content in the cache.
Every test serves ``../shared``'s files from a loopback HTTP server: none reaches the
internet."""

from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcptask_gen.fetch import OFFICIAL_BASE_URL, official_url
from testkit.gen import SCHEMA, SHARED, run_cli


class _Handler(http.server.SimpleHTTPRequestHandler):
    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, directory=str(SHARED / "mcp-schema"), **kwargs)  # type: ignore[arg-type]

    def log_message(self, format: str, *args: object) -> None:
        pass


def _serve() -> tuple[str, http.server.ThreadingHTTPServer]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{httpd.server_address[1]}", httpd


def _stop(httpd: http.server.ThreadingHTTPServer) -> None:
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def server() -> Iterator[str]:
    url, httpd = _serve()
    try:
        yield url
    finally:
        _stop(httpd)


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("MCPTASK_GEN_CACHE_DIR", str(root))
    monkeypatch.delenv("MCPTASK_GEN_NO_CACHE", raising=False)
    return root


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _one_error_line(output: str, *needles: str) -> None:
    lines = [ln for ln in output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("mcptask-gen: error: "), output
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_official_url_is_the_specification_repository(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MCPTASK_GEN_SCHEMA_BASE_URL", raising=False)
    assert OFFICIAL_BASE_URL.startswith(
        "https://raw.githubusercontent.com/modelcontextprotocol/modelcontextprotocol/"
    )
    assert official_url("2025-11-25") == f"{OFFICIAL_BASE_URL}/2025-11-25/schema.json"


def test_schema_url_gives_the_same_package_as_the_file(
    tmp_path: Path, server: str, cache_dir: Path
) -> None:
    by_file, by_url = tmp_path / "a" / "mcp_tasks", tmp_path / "b" / "mcp_tasks"
    assert run_cli(SCHEMA, "-o", by_file).exit_code == 0
    result = run_cli(f"{server}/2025-11-25/schema.json", "-o", by_url)
    assert result.exit_code == 0, result.output
    for path in sorted(by_file.rglob("*.py")):
        assert (by_url / path.relative_to(by_file)).read_bytes() == path.read_bytes()
    stored = list((cache_dir / "schemas").glob("*/schema.json"))
    assert [p.read_bytes() for p in stored] == [SCHEMA.read_bytes()]  # stored by content


def test_revision_alone_fetches_the_official_schema(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, httpd = _serve()
    monkeypatch.setenv("MCPTASK_GEN_SCHEMA_BASE_URL", url)
    out = tmp_path / "mcp_tasks"
    try:
        result = run_cli("--revision", "2025-11-25", "-o", out)
    finally:
        _stop(httpd)
    assert result.exit_code == 0, result.output
    assert (out / "protocol.py").is_file()
    # The host gone, the copy it gave last answers.
    result = run_cli("--revision", "2025-11-25", "-o", out, "--check")
    assert result.exit_code == 0, result.output


def test_http_error_is_one_line(tmp_path: Path, server: str, cache_dir: Path) -> None:
    out = tmp_path / "pkg"
    result = run_cli(f"{server}/1999-01-01/schema.json", "-o", out)
    assert result.exit_code == 2
    _one_error_line(result.output, "cannot fetch", "HTTP 404")
    assert not out.exists()


def test_not_json_is_one_line(tmp_path: Path, server: str, cache_dir: Path) -> None:
    out = tmp_path / "pkg"
    result = run_cli(f"{server}/SOURCE.md", "-o", out)
    assert result.exit_code == 2
    _one_error_line(result.output, "did not return JSON")


def test_unreachable_host_is_one_line(tmp_path: Path, cache_dir: Path) -> None:
    out = tmp_path / "pkg"
    result = run_cli(f"http://127.0.0.1:{_closed_port()}/schema.json", "-o", out)
    assert result.exit_code == 2
    _one_error_line(result.output, "cannot fetch", "127.0.0.1")
