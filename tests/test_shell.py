"""Both commands from a shell, as their pages say: ``--version`` of each, shell completion of
each in bash (``docs/generator.md``, ``docs/example-server.md``), and ``mcptask-gen --check``
as the documented CI step and as this repository's pre-commit hook (``.pre-commit-hooks.yaml``)
in a project whose options live in its ``pyproject.toml``: 0 when its bindings are up to
date, 1 with the summary of what changed when they are stale."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml  # type: ignore[import-untyped, unused-ignore]

from mcp_tasks.descriptor import GENERATOR_VERSION as RUNTIME_VERSION
from mcptask_gen import __version__

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
GENERATOR_DOC = (REPO / "docs" / "generator.md").read_text()
CLI_DOC = (REPO / "docs" / "example-server.md").read_text()


def _bash(script: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``script`` in bash, this environment's commands first on the ``PATH``."""
    env = dict(os.environ, PATH=f"{BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    return subprocess.run(
        ["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_both_commands_say_their_version() -> None:
    gen = _bash("mcptask-gen --version")
    assert gen.returncode == 0 and gen.stdout.strip() == f"mcptask-gen, version {__version__}"
    cli = _bash("mcptask --version")
    assert (
        cli.returncode == 0 and cli.stdout.strip() == f"mcptask (mcptask-runtime) {RUNTIME_VERSION}"
    )


def _documented(doc: str, pattern: str) -> str:
    found = re.search(pattern, " ".join(doc.split()))
    assert found, f"not documented: {pattern}"
    return found[1]


def test_mcptask_gen_completes_in_bash_as_documented() -> None:
    setup = _documented(
        GENERATOR_DOC, r'`(eval "\$\(_MCPTASK_GEN_COMPLETE=bash_source mcptask-gen\)")`'
    )
    out = _bash(
        f"{setup}\nCOMP_WORDS=(mcptask-gen --wi); COMP_CWORD=1\n"
        '_mcptask_gen_completion mcptask-gen; echo "${COMPREPLY[@]}"'
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["--with-runtime"]


def test_mcptask_completes_in_bash_as_documented() -> None:
    pytest.importorskip("argcomplete")  # installed with the tests (the generator needs it)
    setup = _documented(CLI_DOC, r'`(eval "\$\(register-python-argcomplete mcptask\)")`')
    words = {
        "mcptask ca": ["call"],
        "mcptask tasks g": ["get"],
        "mcptask call --pro": ["--protocol"],
    }
    for line, expected in words.items():
        parts = line.split(" ")
        out = _bash(
            f"{setup}\nCOMP_WORDS=({line}); COMP_CWORD={len(parts) - 1}; COMP_LINE={shlex.quote(line)};"
            f" COMP_POINT={len(line)}\n"
            f"_python_argcomplete mcptask {shlex.quote(parts[-1])} {shlex.quote(parts[-2])};"
            ' echo "${COMPREPLY[@]}"'
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == expected, (line, out.stdout, out.stderr)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project whose ``pyproject.toml`` holds mcptask-gen's options, its bindings written."""
    (tmp_path / "pyproject.toml").write_text(
        '[tool.mcptask-gen]\nrevision = ["2025-11-25", "2026-07-28-tasks"]\n'
        'output = "build/my_tasks"\n'
    )
    made = _bash("mcptask-gen", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    return tmp_path


def _stale(project: Path) -> None:
    models = project / "build" / "my_tasks" / "core" / "models.py"
    models.write_text(models.read_text().replace("    pollInterval: ", "    pollEvery: ", 1))


def test_the_documented_ci_step_fails_on_stale_bindings(project: Path) -> None:
    step = _documented(GENERATOR_DOC, r"- name: generated bindings are up to date run: (.+?) ```")
    assert step == "mcptask-gen --check --diff"
    assert _bash(step, cwd=project).returncode == 0
    _stale(project)
    out = _bash(step, cwd=project)
    assert out.returncode == 1
    lines = out.stdout.splitlines()
    assert lines[0] == "core/models.py: Task: + pollInterval: int | None; - pollEvery", lines
    assert "-    pollEvery: " in out.stdout and "+    pollInterval: " in out.stdout  # --diff


def test_the_pre_commit_hook_runs_its_entry_with_the_documented_args(project: Path) -> None:
    """pre-commit runs ``entry`` with the hook's ``args`` (and no file names:
    ``pass_filenames: false``)."""
    (hook,) = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "mcptask-gen-check" and hook["pass_filenames"] is False
    config = GENERATOR_DOC.split("# .pre-commit-config.yaml\n", 1)[1].split("```", 1)[0]
    (repo,) = yaml.safe_load(config)["repos"]
    (used,) = repo["hooks"]
    assert used["id"] == hook["id"]
    command = shlex.join([*shlex.split(hook["entry"]), *used["args"]])
    (project / "pyproject.toml").write_text("")  # the options are the hook's args alone
    assert _bash(command, cwd=project).returncode == 0, command
    _stale(project)
    out = _bash(command, cwd=project)
    assert out.returncode == 1 and out.stdout.startswith("core/models.py: Task: ")
    assert "(--diff shows the diff)" in out.stderr
    assert json.loads((project / "build" / "my_tasks" / ".mcptask-gen-manifest.json").read_text())
