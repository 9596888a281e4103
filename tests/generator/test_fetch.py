"""The schema may be a URL; ``--revision REV`` alone generates from the official schema of that
revision shipped with mcptask-gen (offline, the same bytes every time), and with ``--fetch``
fetches the one published now (the specification repository's ``schema/<rev>/schema.json``,
or ``$MCPTASK_GEN_SCHEMA_BASE_URL/<rev>/schema.json``; the tasks extension's release from its
own repository), stored by content in the cache. Every test serves the official schemas of
``schema/`` from a loopback HTTP server: none reaches the internet."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcptask_gen.fetch import OFFICIAL_BASE_URL, RAW_FILES_URL, official_url
from testkit.gen import SCHEMA, SCHEMA_EXT, SCHEMA_EXT_DRAFT, SCHEMAS, run_cli, tree
from testkit.procs import refusing_port


class _Handler(http.server.SimpleHTTPRequestHandler):
    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, directory=str(SCHEMAS), **kwargs)  # type: ignore[arg-type]

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


def test_the_extension_is_fetched_from_its_own_repository_at_its_release(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """X-ID-4: ``--revision 2026-07-28-tasks`` is the tasks extension's stable release, in
    ``modelcontextprotocol/ext-tasks`` (not the specification repository, not its draft)."""
    monkeypatch.delenv("MCPTASK_GEN_SCHEMA_BASE_URL", raising=False)
    monkeypatch.delenv("MCPTASK_GEN_RAW_FILES_URL", raising=False)
    assert official_url("2026-07-28-tasks") == (
        "https://raw.githubusercontent.com/modelcontextprotocol/ext-tasks/main/schema/2026-07-28/schema.json"
    )
    # The specification repository's base does not apply to another repository.
    monkeypatch.setenv("MCPTASK_GEN_SCHEMA_BASE_URL", "http://mirror.invalid/schema")
    assert official_url("2026-07-28-tasks").startswith(
        f"{RAW_FILES_URL}/modelcontextprotocol/ext-tasks/"
    )
    assert official_url("2025-11-25") == "http://mirror.invalid/schema/2025-11-25/schema.json"


#: What a raw-files host serves at which path: a stand-in for raw.githubusercontent.com.
RAW_FILES = {
    "/modelcontextprotocol/modelcontextprotocol/main/schema/2025-11-25/schema.json": SCHEMA,
    "/modelcontextprotocol/ext-tasks/main/schema/2026-07-28/schema.json": SCHEMA_EXT,
    "/modelcontextprotocol/ext-tasks/main/schema/draft/schema.json": SCHEMA_EXT_DRAFT,
}


class _RawFiles(http.server.BaseHTTPRequestHandler):
    asked: list[str] = []

    def do_GET(self) -> None:
        self.asked.append(self.path)
        path = RAW_FILES.get(self.path)
        if path is None:
            self.send_error(404)
            return
        body = path.read_bytes()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.mark.parametrize(
    ("revision", "path", "schema", "face"),
    [
        (
            "2026-07-28-tasks",
            "/modelcontextprotocol/ext-tasks/main/schema/2026-07-28/schema.json",
            SCHEMA_EXT,
            "extension",
        ),
        (
            "2025-11-25",
            "/modelcontextprotocol/modelcontextprotocol/main/schema/2025-11-25/schema.json",
            SCHEMA,
            "core",
        ),
    ],
    ids=["extension-release", "core"],
)
def test_revision_alone_fetches_under_the_raw_files_base(
    tmp_path: Path,
    cache_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    revision: str,
    path: str,
    schema: Path,
    face: str,
) -> None:
    from mcptask_gen.load import load

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _RawFiles)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    monkeypatch.setattr(_RawFiles, "asked", [])
    monkeypatch.delenv("MCPTASK_GEN_SCHEMA_BASE_URL", raising=False)
    monkeypatch.setenv("MCPTASK_GEN_RAW_FILES_URL", f"http://127.0.0.1:{httpd.server_address[1]}/")
    out = tmp_path / "pkg"
    try:
        result = run_cli("--revision", revision, "--fetch", "-o", out)
    finally:
        _stop(httpd)
    assert result.exit_code == 0, result.output
    assert _RawFiles.asked == [path]
    descriptor = (out / "descriptor.py").read_text()
    assert f'schema_sha256="{load(schema, None).sha256}"' in descriptor


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


def test_fetch_fetches_the_official_schema_and_a_stored_copy_answers_when_offline(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, httpd = _serve()
    monkeypatch.setenv("MCPTASK_GEN_SCHEMA_BASE_URL", url)
    out = tmp_path / "mcp_tasks"
    try:
        result = run_cli("--revision", "2025-11-25", "--fetch", "-o", out)
    finally:
        _stop(httpd)
    assert result.exit_code == 0, result.output
    assert (out / "protocol.py").is_file()
    # The host gone, the copy it gave last answers, and one line says so.
    result = run_cli("--revision", "2025-11-25", "--fetch", "-o", out, "--check")
    assert result.exit_code == 0, result.output
    warnings = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(warnings) == 1 and warnings[0].startswith("mcptask-gen: warning: cannot fetch")
    assert "using the copy fetched on " in warnings[0] and "out of date" in warnings[0]


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every official address on a port that refuses: a run that fetches fails."""
    with refusing_port() as port:
        monkeypatch.setenv("MCPTASK_GEN_RAW_FILES_URL", f"http://127.0.0.1:{port}")
        monkeypatch.setenv("MCPTASK_GEN_SCHEMA_BASE_URL", f"http://127.0.0.1:{port}/schema")
        yield


@pytest.mark.parametrize(
    ("revision", "schema"), [("2025-11-25", SCHEMA), ("2026-07-28-tasks", SCHEMA_EXT)]
)
def test_revision_alone_generates_offline_what_the_schema_file_generates(
    tmp_path: Path, cache_dir: Path, offline: None, revision: str, schema: Path
) -> None:
    """``--revision`` without a schema is the official file mcptask-gen ships: no network,
    the same bytes as generating from that file, and its origin recorded."""
    from mcptask_gen.pinned import pinned

    by_revision, by_file = tmp_path / "a" / "pkg", tmp_path / "b" / "pkg"
    result = run_cli("--revision", revision, "-o", by_revision)
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    assert run_cli(schema, "-o", by_file).exit_code == 0
    assert tree(by_revision) == tree(by_file)
    official = pinned(revision)
    assert official.file.read_bytes() == schema.read_bytes()
    assert f'schema_source="{official.origin}"' in (by_revision / "descriptor.py").read_text()
    assert run_cli("--revision", revision, "-o", by_revision, "--check").exit_code == 0


def test_both_faces_by_revision_in_one_run(tmp_path: Path, cache_dir: Path, offline: None) -> None:
    by_revision, by_files = tmp_path / "a" / "pkg", tmp_path / "b" / "pkg"
    result = run_cli(
        "--revision", "2025-11-25", "--revision", "2026-07-28-tasks", "-o", by_revision
    )
    assert result.exit_code == 0, result.output
    assert run_cli(SCHEMA, SCHEMA_EXT, "-o", by_files).exit_code == 0
    assert tree(by_revision) == tree(by_files)
    assert {"core", "extension"} <= {p.name for p in by_revision.iterdir()}


def test_a_revision_without_a_shipped_schema_is_one_line(tmp_path: Path, offline: None) -> None:
    result = run_cli("--revision", "2027-03-31", "-o", tmp_path / "pkg")
    assert result.exit_code == 2
    _one_error_line(result.output, "ships no schema of it", "2025-11-25", "--fetch")


def test_several_revisions_name_no_schema(tmp_path: Path) -> None:
    result = run_cli(
        SCHEMA, "--revision", "2025-11-25", "--revision", "2026-07-28-tasks", "-o", tmp_path / "p"
    )
    assert result.exit_code == 2
    _one_error_line(result.output, "--revision names the revision of one SCHEMA")
    result = run_cli(SCHEMA, "--fetch", "-o", tmp_path / "p")
    assert result.exit_code == 2
    _one_error_line(result.output, "--fetch")


def test_http_error_is_one_line(tmp_path: Path, server: str, cache_dir: Path) -> None:
    out = tmp_path / "pkg"
    result = run_cli(f"{server}/1999-01-01/schema.json", "-o", out)
    assert result.exit_code == 2
    _one_error_line(result.output, "cannot fetch", "HTTP 404")
    assert not out.exists()


def test_not_json_is_one_line(tmp_path: Path, server: str, cache_dir: Path) -> None:
    out = tmp_path / "pkg"
    result = run_cli(f"{server}/2025-11-25/SOURCE.md", "-o", out)
    assert result.exit_code == 2
    _one_error_line(result.output, "did not return JSON")


def test_unreachable_host_is_one_line(tmp_path: Path, cache_dir: Path) -> None:
    out = tmp_path / "pkg"
    with refusing_port() as port:
        result = run_cli(f"http://127.0.0.1:{port}/schema.json", "-o", out)
    assert result.exit_code == 2
    _one_error_line(result.output, "cannot fetch", "127.0.0.1")
