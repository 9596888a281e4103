"""Every shell command of the README's tutorial and of ``docs/clients.md`` runs as written (but
for the port): the bare code blocks, the command a Python block's first line names (``#
FILE: COMMAND``), and the ``python -m ...`` / ``mcptask ...`` spans of the text that name no
placeholder. A command that serves (``--http``, a ``*server.py``) is started and must
listen; the others run against it, in order, and must exit 0, with the Python blocks
written beside them under the names they are given (and the README's bindings in
``build/my_tasks`` where a block imports them). ``127.0.0.1:8000`` becomes a free port.

Besides exiting 0: the ``mcptask`` commands of the tutorial print the tool's result and, on
both faces, its progress on stderr; the tutorial's client prints the result on each face."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from testkit.procs import free_port, python_env, stop_process, wait_listening

pytestmark = pytest.mark.door_agnostic  # the commands, not the door

REPO = Path(__file__).resolve().parents[2]
DOCS = {
    "README tutorial": (REPO / "README.md")
    .read_text()
    .split("## Five-minute tutorial", 1)[1]
    .split("\n## ", 1)[0],
    "docs/clients.md": (REPO / "docs" / "clients.md").read_text(),
}
ADDRESS = "127.0.0.1:8000"
#: the README's generate command writes the bindings here; a block beside them imports them
BINDINGS = "build/my_tasks"


@dataclass
class Doc:
    """What a page asks its reader to run: its Python files and its commands, in order."""

    files: dict[str, str] = field(default_factory=dict)
    commands: list[str] = field(default_factory=list)


def _header(block: str) -> tuple[str | None, str | None]:
    """(file, command) of a Python block whose first line is ``# PATH.py...`` (its file)
    and may end ``: COMMAND`` (how to run it)."""
    first = block.split("\n", 1)[0]
    named = re.match(r"# (\S+\.py)\b", first)
    command = re.search(r": ((?:python|cd) .+)$", first)
    return (named[1] if named else None), (command[1] if command else None)


def _expand(command: str) -> list[str]:
    """``python x.py A (or B)`` -> ``python x.py A``, ``python x.py B``."""
    found = re.match(r"(.*\S) (\S+) \(or (\S+)\)$", command)
    if found is None:
        return [command]
    return [f"{found[1]} {found[2]}", f"{found[1]} {found[3]}"]


def read(text: str) -> Doc:
    doc = Doc()
    pieces = re.split(r"(^```\w*\n.*?^```$)", text, flags=re.S | re.M)
    for piece in pieces:
        fenced = re.match(r"```(\w*)\n(.*)```$", piece, re.S)
        if fenced is None:  # prose: its runnable spans
            for span in re.findall(r"`((?:python -m|mcptask) [^`]+)`", piece):
                if not re.search(r"\b[A-Z]{2,}\b", span):  # URL, ID, ...: a placeholder
                    doc.commands.append(span)
            continue
        info, body = fenced[1], fenced[2]
        if info == "python":
            file, command = _header(body)
            if file is not None:
                doc.files[file] = body
            if command is not None:
                doc.commands += _expand(command)
        elif not info:
            doc.commands += [line for line in body.splitlines() if line.strip()]
    doc.commands = list(dict.fromkeys(doc.commands))  # a command said twice runs once
    return doc


def serves(command: str) -> bool:
    return "--http" in command or bool(re.search(r"server\.py\b", command))


@pytest.fixture(scope="module")
def my_tasks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bindings of the README's generate command."""
    out = tmp_path_factory.mktemp("bindings") / "my_tasks"
    made = subprocess.run(
        [sys.executable, "-m", "mcptask_gen", "--revision", "2025-11-25"]
        + ["--revision", "2026-07-28-tasks", "-o", str(out)],
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0, made.stderr
    return out


def _env() -> dict[str, str]:
    env = python_env()
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"  # python, mcptask
    return env


@contextmanager
def _serving(command: str, cwd: Path, port: int) -> Iterator[None]:
    log = cwd / f"server-{port}.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            shlex.split(command), cwd=cwd, env=_env(), stdout=sink, stderr=subprocess.STDOUT
        )
    try:
        wait_listening(proc, port, log, timeout=60, what=command)
        yield
    finally:
        stop_process(proc)


def _place(doc: Doc, root: Path, port: int, bindings: Path) -> None:
    """The page's files where its commands expect them (the bindings beside a file that
    imports them), the port changed."""
    import shutil

    for name, body in doc.files.items():
        if name == "tutorial_server.py":
            body = body.replace("port: int = 8000", f"port: int = {port}")
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body.replace(ADDRESS, f"127.0.0.1:{port}"))
        if "from my_tasks" in body and not (target.parent / "my_tasks").exists():
            shutil.copytree(bindings, target.parent / "my_tasks")


def run_doc(
    name: str, root: Path, bindings: Path
) -> list[tuple[str, subprocess.CompletedProcess[str]]]:
    """Each command of page ``name``: its servers started one after the other (the commands
    after one run against it), its other commands run in order."""
    doc = read(DOCS[name])
    port = free_port()
    _place(doc, root, port, bindings)
    ran: list[tuple[str, subprocess.CompletedProcess[str]]] = []
    # each server with the commands after it; those before the first server run against it
    groups: list[tuple[str, list[str]]] = []
    waiting: list[str] = []
    for command in doc.commands:
        if serves(command):
            groups.append((command, waiting))
            waiting = []
        elif groups:
            groups[-1][1].append(command)
        else:
            waiting.append(command)
    assert groups and not waiting, f"{name}: commands without a server: {waiting}"
    for server, commands in groups:
        with _serving(server.replace(ADDRESS, f"127.0.0.1:{port}"), root, port):
            for command in commands:
                line = command.replace(ADDRESS, f"127.0.0.1:{port}")
                out = subprocess.run(
                    ["bash", "-c", line],
                    cwd=root,
                    env=_env(),
                    capture_output=True,
                    text=True,
                    stdin=subprocess.DEVNULL,
                    timeout=180,
                )
                assert out.returncode == 0, f"{command}\n{out.stdout}\n{out.stderr}"
                ran.append((command, out))
    return ran


def test_the_readme_tutorial_s_commands_run_as_written(tmp_path: Path, my_tasks: Path) -> None:
    ran = run_doc("README tutorial", tmp_path, my_tasks)
    commands = [c for c, _ in ran]
    assert "python tutorial_client.py 2025-11-25" in commands
    assert "python tutorial_client.py 2026-07-28" in commands
    by_hand = [(c, out) for c, out in ran if c.startswith("mcptask call")]
    assert len(by_hand) == 2 and any("--protocol 2026-07-28" in c for c, _ in by_hand)
    for command, out in by_hand:
        assert out.stdout.strip() == "counted to 3", command
        assert "progress: at 1" in out.stderr, f"{command}: no progress\n{out.stderr}"
    for command, out in ran:
        if command.startswith("python tutorial_client.py"):
            assert "counted to 3" in out.stdout, command
            assert "progress:" in out.stdout, command


def test_the_client_page_s_commands_run_as_written(tmp_path: Path, my_tasks: Path) -> None:
    ran = run_doc("docs/clients.md", tmp_path, my_tasks)
    outputs = {c: out.stdout for c, out in ran}
    typed = next(v for c, v in outputs.items() if "typed_client.py" in c)
    assert "2025-11-25: task " in typed and " completed" in typed
    assert "2026-07-28: task " in typed and "done after 1s" in typed
    stock = next(v for c, v in outputs.items() if "stock_client.py" in c)
    assert "done after 3s" in stock


def test_the_pages_commands_are_found() -> None:
    """The reader's commands, as the pages give them (a page that drops one fails here)."""
    tutorial = read(DOCS["README tutorial"]).commands
    assert tutorial[:3] == [
        "python tutorial_server.py",
        "python tutorial_client.py 2025-11-25",
        "python tutorial_client.py 2026-07-28",
    ]
    assert sum(c.startswith("mcptask ") for c in tutorial) == 3
    assert all("--token tutorial-token" in c for c in tutorial if c.startswith("mcptask "))
    clients = read(DOCS["docs/clients.md"]).commands
    assert "python stock_client.py http://127.0.0.1:8000/mcp" in clients
    assert "cd build && python typed_client.py http://127.0.0.1:8000/mcp" in clients
