"""The FastMCP peer's virtualenv helper: reused by its stamp, rebuilt when stale; a test that
needs it is skipped while it is missing, failed under CI (no network needed: the install is
replaced)."""

from __future__ import annotations

from pathlib import Path

import pytest

from testkit import fastmcp_peer


def fake_venv(path: Path, stamp: str | None) -> Path:
    (path / "bin").mkdir(parents=True)
    (path / "bin" / "python").write_text("")
    if stamp is not None:
        (path / fastmcp_peer.STAMP_NAME).write_text(stamp)
    return path


def test_reused_only_while_the_stamp_matches(tmp_path: Path) -> None:
    ready = fake_venv(tmp_path / "ready", fastmcp_peer._wanted())
    assert fastmcp_peer.is_ready(ready)
    assert fastmcp_peer.ensure_venv(ready) == ready / "bin" / "python"  # nothing installed
    old = fake_venv(tmp_path / "old", "fastmcp==4.0.0 fastmcp-tasks==4.0.0 mcp==2.2.0\n")
    assert not fastmcp_peer.is_ready(old)
    assert not fastmcp_peer.is_ready(fake_venv(tmp_path / "none", None))


def test_stale_venv_is_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    venv = fake_venv(tmp_path / "v", "stale\n")
    ran: list[list[str]] = []
    monkeypatch.setattr(fastmcp_peer, "_run", ran.append)
    assert fastmcp_peer.ensure_venv(venv) == venv / "bin" / "python"
    assert ran[0][1:3] == ["-m", "venv"] and ran[1][-3:] == list(fastmcp_peer.PINS)
    assert fastmcp_peer.is_ready(venv)


def test_skipped_while_missing_failed_under_ci(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No test installs it: a missing venv is a skip (a failure under CI) naming the command
    that installs it."""
    monkeypatch.setattr(fastmcp_peer, "VENV", tmp_path / "none")
    monkeypatch.setattr(fastmcp_peer, "is_ready", lambda venv=tmp_path / "none": False)
    monkeypatch.setattr(fastmcp_peer, "_run", lambda argv: pytest.fail(f"installed: {argv}"))
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="tests/install_peers.py"):
        fastmcp_peer.peer_python()
    monkeypatch.setenv("CI", "1")
    with pytest.raises(pytest.fail.Exception, match="tests/install_peers.py"):
        fastmcp_peer.peer_python()
