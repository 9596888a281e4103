"""The forked step of a cold run (datamodel-code-generator beside the templates): same result
as inline, errors reach the CLI as one line, and no child outlives the run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from mcptask_gen.background import Background, can_fork
from mcptask_gen.errors import GeneratorError
from testkit.gen import SCHEMA, VENV_BIN, tree, write_schema
from testkit.wait import until

needs_fork = pytest.mark.skipif(not can_fork(), reason="no fork here (or other threads)")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@needs_fork
def test_result_comes_from_another_process() -> None:
    with Background(lambda _: os.getpid(), fork=True) as job:
        job.send(None)
        child = job.result()
    assert child != os.getpid()
    assert not _alive(child)


@pytest.mark.parametrize("fork", [True, False])
def test_errors_keep_their_type_and_message(fork: bool) -> None:
    if fork and not can_fork():
        pytest.skip("no fork here")

    def bad_schema(_: object) -> None:
        raise GeneratorError("datamodel-code-generator could not build the models: boom")

    def deep(_: object) -> None:
        raise RecursionError("maximum recursion depth exceeded")

    with Background(bad_schema, fork=fork) as job, pytest.raises(GeneratorError, match="boom$"):
        job.send(None)
        job.result()
    with Background(deep, fork=fork) as job, pytest.raises(RecursionError):
        job.send(None)
        job.result()


@needs_fork
def test_an_unexpected_error_carries_the_child_traceback() -> None:
    def bug(_: object) -> None:
        raise KeyError("missing")

    with Background(bug, fork=True) as job, pytest.raises(KeyError) as info:
        job.send(None)
        job.result()
    assert any("in the background worker" in note for note in info.value.__notes__)


@needs_fork
def test_a_child_killed_by_a_signal_is_reported() -> None:
    def die(_: object) -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    with Background(die, fork=True) as job, pytest.raises(GeneratorError, match="signal 9"):
        job.send(None)
        job.result()


@needs_fork
def test_close_kills_and_reaps_an_unwanted_child(tmp_path: Path) -> None:
    marker = tmp_path / "pid"

    def slow() -> None:
        marker.write_text(str(os.getpid()))
        time.sleep(60)  # a child still working when it is no longer wanted

    job: Background[None] = Background(lambda _: None, prepare=slow, fork=True)
    written = until(lambda: marker.exists() and marker.read_text(), what="the child's pid")
    pid = int(written)
    job.close()
    assert not _alive(pid)  # killed and reaped: not even a zombie is left


def test_without_fork_the_step_runs_inline_when_asked() -> None:
    calls: list[object] = []

    def step(value: object) -> str:
        calls.append(value)
        return "done"

    job = Background(step, fork=False)
    job.send("defs")
    assert calls == []
    assert job.result() == "done"
    assert calls == ["defs"]


@pytest.mark.parametrize("fork", [True, False])
def test_result_before_send_fails_at_once(fork: bool) -> None:
    """Never a deadlock: a forked worker would wait for its input forever."""
    if fork and not can_fork():
        pytest.skip("no fork here")
    with Background(lambda v: v, fork=fork) as job, pytest.raises(RuntimeError, match="send"):
        job.result()


@needs_fork
def test_a_worker_whose_input_never_comes_exits_quietly() -> None:
    """The parent went on without it (a cache hit): closing the input pipe ends the child."""
    job: Background[object] = Background(lambda v: v, fork=True)
    pid = job._pid
    os.close(job._in)
    job._in = -1
    _, status = os.waitpid(pid, 0)
    job._pid = 0
    job.close()
    assert os.waitstatus_to_exitcode(status) == 0


def _gen(schema: Path, out: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(VENV_BIN / "mcptask-gen"), str(schema), "-o", str(out)],
        env={**os.environ, "MCPTASK_GEN_NO_CACHE": "1", **env},
        capture_output=True,
        text=True,
    )


def test_forked_and_inline_runs_write_the_same_bytes(tmp_path: Path) -> None:
    """A fresh process (no threads) forks; MCPTASK_GEN_NO_FORK=1 runs everything inline."""
    forked, inline = tmp_path / "a" / "mcp_tasks", tmp_path / "b" / "mcp_tasks"
    assert _gen(SCHEMA, forked).returncode == 0
    assert _gen(SCHEMA, inline, MCPTASK_GEN_NO_FORK="1").returncode == 0
    assert tree(forked) == tree(inline)


@pytest.mark.parametrize("no_fork", ["", "1"])
def test_a_models_failure_in_the_child_is_one_line_and_writes_nothing(
    tmp_path: Path, schema_doc: dict[str, Any], no_fork: str
) -> None:
    """datamodel-code-generator rejects a string ``minimum`` (our checks let it through); the
    error raised in the forked child reaches the user as the usual one line, exit 2."""
    doc = json.loads(json.dumps(schema_doc))
    doc["$defs"]["Task"]["properties"]["taskId"] = {"type": "integer", "minimum": "a"}
    schema = write_schema(tmp_path / "schema.json", doc)
    out = tmp_path / "out" / "mcp_tasks"
    result = _gen(schema, out, MCPTASK_GEN_NO_FORK=no_fork)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mcptask-gen: error: "), result.stderr
    assert "datamodel-code-generator could not build the models" in lines[0]
    assert "Traceback" not in result.stderr
    assert not out.exists()


def test_no_cache_reaches_the_worker_started_before_the_options_were_read(tmp_path: Path) -> None:
    """The launcher forks before click parses ``--no-cache``; the worker must still neither
    read nor write the cache."""
    cache_dir = tmp_path / "cache"
    out = tmp_path / "out" / "mcp_tasks"
    result = subprocess.run(
        [str(VENV_BIN / "mcptask-gen"), str(SCHEMA), "-o", str(out), "--no-cache"],
        env={**os.environ, "MCPTASK_GEN_CACHE_DIR": str(cache_dir)},
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert not cache_dir.exists()


def test_launcher_cold_then_warm_gives_the_same_bytes(tmp_path: Path) -> None:
    """Cold (worker started early), then warm (models from the cache, no worker)."""
    env = {**os.environ, "MCPTASK_GEN_CACHE_DIR": str(tmp_path / "cache")}
    outs = []
    for run in ("cold", "warm"):
        out = tmp_path / run / "mcp_tasks"
        cmd = [str(VENV_BIN / "mcptask-gen"), str(SCHEMA), "-o", str(out)]
        assert subprocess.run(cmd, env=env, capture_output=True).returncode == 0
        outs.append(tree(out))
    assert any((tmp_path / "cache" / "models").iterdir())
    assert outs[0] == outs[1]


@needs_fork
def test_an_early_worker_is_killed_when_the_run_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcptask_gen import background, launcher

    started: list[Background[Any]] = []
    real_adopt = background.adopt

    def adopt(job: Background[Any]) -> None:
        started.append(job)
        real_adopt(job)

    monkeypatch.setattr(background, "adopt", adopt)
    monkeypatch.setenv("MCPTASK_GEN_NO_CACHE", "1")
    monkeypatch.setattr(sys, "argv", ["mcptask-gen", str(tmp_path / "missing.json"), "-o", "x"])
    with pytest.raises(SystemExit) as info:
        launcher.main()
    assert info.value.code == 2
    assert len(started) == 1 and started[0].forked is False  # reaped by the launcher
    assert background.take() is None


def test_a_failed_fork_runs_the_step_inline(monkeypatch: pytest.MonkeyPatch) -> None:
    """EAGAIN from fork (a process limit) is a slower run, not a traceback."""

    def no_fork() -> int:
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    before = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else 0
    job = Background(lambda v: v * 2, fork=True)
    assert not job.forked
    job.send(21)
    assert job.result() == 42
    if before:
        assert len(os.listdir("/proc/self/fd")) == before  # the pipes were closed
