"""The README tells the truth: every Python block of it and of ``docs/`` passes ``mypy --strict``
after the README's install and runs (the handler examples are served by
``tests/mcp/test_handlers_served.py``), its links lead somewhere, its limits are the defaults,
the benchmark tables live in ``benchmarks/README.md`` where ``peers_bench.py`` writes them,
and a newcomer reads what they need first."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.typecheck import TYPECHECK, assert_mypy_strict

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
#: the reference pages the README links to, whose code is held to the same standard
DOCS = sorted((REPO / "docs").glob("*.md"))
PYTHON_BLOCKS = [
    block
    for text in (README, *(page.read_text() for page in DOCS))
    for block in re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)
]


#: the README's generate command (its install part aside), and where it writes the bindings
GENERATE = README.split("&& .venv/bin/mcptask-gen ", 1)[1].split("\n", 1)[0].split()
BINDINGS = "build/my_tasks"


@pytest.fixture(scope="module")
def bindings(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bindings of the README's generate command, made once (its example runs beside
    them, in ``build/``)."""
    out = tmp_path_factory.mktemp("readme") / "my_tasks"
    argv = [str(out) if arg == BINDINGS else arg for arg in GENERATE]
    assert argv != GENERATE, f"the README's generate command no longer writes {BINDINGS}"
    made = subprocess.run(
        [sys.executable, "-m", "mcptask_gen", *argv], cwd=REPO, capture_output=True, text=True
    )
    assert made.returncode == 0, made.stderr
    return out


def _write_blocks(directory: Path, bindings: Path, only: int | None = None) -> list[str]:
    """Every block (or block ``only``) written into ``directory``, beside a copy of the
    bindings when one of them imports them."""
    names = []
    for i, block in enumerate(PYTHON_BLOCKS):
        name = f"readme_block_{i}.py"
        if only in (None, i):
            (directory / name).write_text(block)
            if "from my_tasks" in block and not (directory / "my_tasks").exists():
                shutil.copytree(bindings, directory / "my_tasks")
        names.append(name)
    return names


@TYPECHECK
def test_every_python_block_passes_mypy_strict(tmp_path: Path, bindings: Path) -> None:
    """From a directory outside the repository, with this environment's mypy: the packages
    resolve through the editable install alone (no MYPYPATH, no repository config)."""
    assert len(PYTHON_BLOCKS) >= 4
    names = _write_blocks(tmp_path, bindings)
    assert_mypy_strict(*names, cwd=tmp_path)


@pytest.mark.parametrize("index", range(len(PYTHON_BLOCKS)))
def test_every_python_block_runs(tmp_path: Path, index: int, bindings: Path) -> None:
    """Each block runs as a module (its ``if __name__ == "__main__"`` part, which would serve,
    does not), with warnings as errors."""
    name = _write_blocks(tmp_path, bindings, only=index)[index]
    out = subprocess.run(
        [sys.executable, "-W", "error", "-c"]
        + ["import runpy, sys; runpy.run_path(sys.argv[1], run_name='readme_block')", name],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, PYTHON_BLOCKS[index] + out.stdout + out.stderr


def test_relative_links_exist() -> None:
    for base, text in (
        (REPO, README),
        (REPO / "benchmarks", (REPO / "benchmarks/README.md").read_text()),
        *((page.parent, page.read_text()) for page in DOCS),
    ):
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text):
            assert (base / target).exists(), target


def test_peer_tables_live_in_benchmarks_readme(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    start, end = "<!-- peers-bench:start -->", "<!-- peers-bench:end -->"
    assert start not in README and "benchmarks/README.md" in README
    bench_readme = REPO / "benchmarks" / "README.md"
    assert start in bench_readme.read_text() and end in bench_readme.read_text()
    spec = importlib.util.spec_from_file_location("peers_bench", REPO / "benchmarks/peers_bench.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "peers_bench", bench)  # its dataclasses look it up
    monkeypatch.setattr(sys, "path", list(sys.path))  # it adds benchmarks/peers
    spec.loader.exec_module(bench)
    assert Path(bench.README) == bench_readme
    copy = tmp_path / "README.md"
    copy.write_text(f"intro\n{start}\nold\n{end}\ntail\n")
    monkeypatch.setattr(bench, "README", copy)
    assert bench.update_readme("| new | table |\n")
    text = copy.read_text()
    assert "old" not in text and "| new | table |" in text and text.endswith("tail\n")
    for plot in re.findall(r"\]\(([^)]+\.png)\)", text):
        assert (bench_readme.parent / plot).exists(), plot


def test_limits_table_matches_engine_defaults() -> None:
    from mcp_tasks.runtime import EngineConfig

    cfg = EngineConfig()
    section = README.split("## Runtime limits", 1)[1].split("\n## ", 1)[0]
    rows = {m.group(2): m.group(1) for m in re.finditer(r"\| ([^|]*) \| `([a-z_]+)`", section)}
    numbers = {
        k: [int(n.replace(",", "")) for n in re.findall(r"\d[\d,]*", v)] for k, v in rows.items()
    }
    assert cfg.default_ttl_ms in numbers["default_ttl_ms"]
    assert cfg.max_ttl_ms in numbers["max_ttl_ms"]
    assert cfg.max_active_per_requestor in numbers["max_active_per_requestor"]
    assert cfg.page_size in numbers["page_size"]
    assert cfg.poll_interval_ms in numbers["poll_interval_ms"]
    assert cfg.sweep_interval_s in numbers["sweep_interval_s"]
    assert cfg.shutdown_grace_s in numbers["shutdown_grace_s"]
    assert cfg.max_tasks_total in numbers["max_tasks_total"]
    assert cfg.max_result_bytes_total == 1 << 30 and "1 GiB" in rows["max_result_bytes_total"]
    rate = re.search(r"\| ([\d,]+) per (\d+) s", section)
    assert rate is not None
    assert (int(rate.group(1).replace(",", "")), float(rate.group(2))) == (
        cfg.rate_limit_calls,
        cfg.rate_limit_window_s,
    )
    assert cfg.allow_unlimited_ttl is False


def test_a_newcomer_reads_what_they_need_first() -> None:
    """What it is, the two commands, the tutorial (a server with one task tool, a client on
    both faces), the glossary, then reference; the long material lives in ``docs/``."""
    heads = re.findall(r"^## (.+)$", README, re.M)
    assert heads[:4] == ["The two commands", "Five-minute tutorial", "Glossary", "Reference"]
    tutorial = README.split("## Five-minute tutorial", 1)[1].split("\n## ", 1)[0]
    assert (
        "@tools.tool(" in tutorial and "2026-07-28" in tutorial and "connect(URL, face=" in tutorial
    )
    glossary = README.split("## Glossary", 1)[1].split("\n## ", 1)[0]
    for term in ("**task**", "**requestor**", "**face**", "**rule IDs**", "`gather_first`"):
        assert term in glossary, term
    for spec in ("tasks-2025-11-25.md", "tasks-extension.md"):
        assert spec in glossary
    assert len(README.split()) < 3500  # about ten minutes' reading
    assert "redis-server" in README.split("## Five-minute tutorial", 1)[0]
    # the generate command installs the runtime beside the generator
    assert "'./generated[mcp]'" in README.split("```", 2)[1]
