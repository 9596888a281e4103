"""The extras the README and ``docs/`` name exist (the runtime's, of ``mcptask-runtime``, built
from ``generated/``; the generator's ``test``), install from a clone, stay covered by
``.ci/constraints.txt``, and a command missing one says which in one line: the example
server's ``--ops`` (the ``ops`` extra) and ``--on-workers``, and the worker (``workers``).

"Missing" is real: the command runs in a child Python whose import system refuses the
module (a meta-path finder installed before the command's own ``python -m`` start)."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

from mcp_tasks import descriptor
from mcp_tasks.runtime.parts import EXTRA, MODULES
from testkit.procs import python_env

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
#: the generator's extras (``test``)
OPTIONAL = PYPROJECT["project"]["optional-dependencies"]
#: the runtime's distribution, as installed (its metadata is made from its descriptor)
RUNTIME = "mcptask-runtime"


def _runtime_extras() -> dict[str, list[str]]:
    """Extra -> its requirement lines (without the extra's marker), of the installed runtime."""
    out: dict[str, list[str]] = {}
    for line in metadata.requires(RUNTIME) or []:
        req, _, marker = line.partition(";")
        found = re.search(r"""extra\s*==\s*["']([a-z0-9_-]+)["']""", marker)
        if found:
            out.setdefault(found[1], []).append(req.strip())
    return out


RUNTIME_EXTRAS = _runtime_extras()

#: ``python -m MODULE ARGS...`` with the top-level modules of argv[1] (comma-separated)
#: refused by the import system, as when they are not installed
WITHOUT = """\
import runpy, sys
from importlib.abc import MetaPathFinder

refused = set(sys.argv[1].split(","))

class Refuse(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in refused:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Refuse())
sys.argv = sys.argv[2:]
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
"""


def _extras_named(text: str) -> dict[str, set[str]]:
    """The extras in ``pip install`` lines, by distribution: ``./generated[a,b]`` and
    ``mcptask-runtime[a]`` the runtime's, ``.[a]`` and ``mcptask-gen[a]`` the generator's."""
    found: dict[str, set[str]] = {"runtime": set(), "generator": set()}
    pattern = r"(\./generated|mcptask-runtime|mcptask-gen|['\s]\.)\[([a-z0-9_,\s-]+)\]"
    for where, names in re.findall(pattern, text):
        which = "runtime" if where in ("./generated", "mcptask-runtime") else "generator"
        found[which].update(name.strip() for name in names.split(","))
    return found


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_every_extra_the_docs_name_exists_and_installs_from_a_clone() -> None:
    named: dict[str, dict[str, set[str]]] = {"runtime": {}, "generator": {}}
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for which, extras in _extras_named(text).items():
            for extra in extras:
                named[which].setdefault(extra, set()).add(doc.name)
        # not on PyPI: an install by name fails; the docs install from a clone
        assert "install 'mcptask-gen[" not in text and "install 'mcptask-runtime[" not in text
        # the runtime's extras are not the generator's any more
        assert not re.search(r"-e '\.\[(mcp|redis|ops|workers)", text), doc.name
    assert {"mcp", "redis", "ops", "workers"} <= set(named["runtime"]), named
    unknown = {e: docs for e, docs in named["runtime"].items() if e not in RUNTIME_EXTRAS}
    assert not unknown, f"extras the docs name that {RUNTIME} lacks: {unknown}"
    unknown = {e: docs for e, docs in named["generator"].items() if e not in OPTIONAL}
    assert not unknown, f"extras the docs name that pyproject.toml lacks: {unknown}"
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for extra in RUNTIME_EXTRAS:  # the install section lists them all
        assert f"[{extra}]" in readme or f"[mcp,{extra}]" in readme, extra


def test_every_statement_of_the_mcp_range_is_the_mcp_extras() -> None:
    """The ``mcp`` range the README and docs state is the one the runtime's ``mcp`` extra
    requires (its one home, ``templates/needs.toml``, through the package's
    ``descriptor.PARTS``; ``_sdk.MCP_SUPPORTED`` is read from it too), and the docs state it at
    least where they say what is supported."""
    (wanted,) = (r for r in descriptor.PARTS["runtime"].requires if _name(r) == "mcp")
    (installed,) = (r for r in RUNTIME_EXTRAS["mcp"] if _name(r) == "mcp")
    assert sorted(installed.removeprefix("mcp").split(",")) == sorted(
        wanted.removeprefix("mcp").split(",")
    )
    stated = {
        (doc.name, found)
        for doc in DOCS
        for found in re.findall(
            r"\bmcp ?[<>=~!]=?[\d.]+(?:, ?[<>=~!]=?[\d.]+)*", doc.read_text("utf-8")
        )
    }
    assert {doc for doc, _ in stated} >= {"serving.md", "why.md", "errors.md"}, stated
    assert {found for _, found in stated} == {wanted}, f"the mcp extra says {wanted}: {stated}"


def test_what_a_part_asks_for_is_what_its_extra_installs() -> None:
    """The lines a missing part names (the package's ``descriptor.PARTS``) are the runtime's
    extra of that part, as installed, and every module the part checks for is one of them;
    ``all`` holds every part."""
    for part, extra in EXTRA.items():
        declared = {_name(r) for r in RUNTIME_EXTRAS[extra]}
        assert {_name(line) for line in descriptor.PARTS[part].requires} == declared, part
        assert declared <= {_name(r) for r in RUNTIME_EXTRAS["all"]}, part
        distributions = {"prometheus_client": "prometheus-client", "docket": "pydocket"}
        distributions |= {"mcp_types": "mcp"}
        for module in MODULES[part]:
            assert distributions.get(module, module) in declared, (part, module)
    bindings = {_name(line) for line in descriptor.PARTS["bindings"].requires}
    base = {_name(line) for line in metadata.requires(RUNTIME) or [] if "extra ==" not in line}
    assert bindings == base == {"pydantic", "anyio"}


def test_the_runtime_requires_none_of_the_generator() -> None:
    """A server installs the runtime: none of the generator's dependencies is among its
    requirements, base or extra."""
    runtime = {_name(line.partition(";")[0]) for line in metadata.requires(RUNTIME) or []}
    generator = {_name(r) for r in PYPROJECT["project"]["dependencies"]} - {"pydantic"}
    for name in ("datamodel-code-generator", "black", "jinja2", "click"):
        assert name in generator
    assert not runtime & (generator | {"isort", "genson", "inflect", "mcptask-gen"}), runtime


def test_the_constraints_cover_the_test_command() -> None:
    """``pip install -c .ci/constraints.txt -e '.[test]' -e './generated[all]'`` pins every
    distribution the two name (the README's test command)."""
    text = (REPO / ".ci" / "constraints.txt").read_text(encoding="utf-8")
    pinned = {_name(line) for line in text.splitlines() if line and not line.startswith("#")}
    wanted = [*OPTIONAL["test"], *RUNTIME_EXTRAS["all"], *descriptor.PARTS["bindings"].requires]
    names = {
        _name(r)
        for r in wanted
        if "sys_platform != 'win32'" in r or 'sys_platform != "win32"' in r or ";" not in r
    }
    assert names - pinned == set(), "not in .ci/constraints.txt"


@pytest.mark.parametrize(
    ("refused", "extra", "command"),
    [
        pytest.param(
            "prometheus_client",
            "ops",
            ["mcp_tasks.examples.server", "--http", "127.0.0.1:0", "--ops", "127.0.0.1:0",
             "--metrics-token-file", "{token}"],
            id="server --ops",
        ),
        pytest.param(
            "docket",
            "workers",
            ["mcp_tasks.examples.server", "--http", "127.0.0.1:0",
             "--store", "redis://127.0.0.1:1/0", "--on-workers"],
            id="server --on-workers",
        ),
        pytest.param(
            "docket",
            "workers",
            ["mcp_tasks.worker", "--store", "redis://127.0.0.1:1/0",
             "mcp_tasks.examples.server:worker_app"],
            id="worker without docket",
        ),
        pytest.param(
            "redis",
            "workers",
            ["mcp_tasks.worker", "--store", "redis://127.0.0.1:1/0",
             "mcp_tasks.examples.server:worker_app"],
            id="worker without redis",
        ),
    ],
)  # fmt: skip
def test_a_missing_extra_is_one_line_naming_it(
    refused: str, extra: str, command: list[str], tmp_path: Path
) -> None:
    token = tmp_path / "metrics.token"
    token.write_text("Ab+/cd+ef/gh+ij/kl+mn/op+qr/st==\n", encoding="utf-8")
    argv = [arg.replace("{token}", str(token)) for arg in command]
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT, refused, *argv],
        capture_output=True,
        text=True,
        timeout=60,
        env=python_env(),
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"python -m {argv[0]}: error: "), lines[0]
    assert f"the '{extra}' extra ({refused} is not installed)" in lines[0]
    assert f"pip install './generated[{extra}]'" in lines[0]


#: ``import MODULE`` (argv[2]) with the top-level modules of argv[1] refused by the import system
IMPORT_WITHOUT = WITHOUT.replace(
    'sys.argv = sys.argv[2:]\nrunpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)\n',
    "import importlib\nimportlib.import_module(sys.argv[2])\n",
)


@pytest.mark.parametrize(
    ("module", "refused", "extra"),
    [
        ("mcp_tasks.runtime.stores.redis", "redis", "redis"),
        ("mcp_tasks.runtime.ops.metrics", "prometheus_client", "ops"),
    ],
)
def test_importing_a_part_without_its_extra_says_which_in_one_line(
    module: str, refused: str, extra: str
) -> None:
    """An optional part of the runtime imported without its extra: one line naming the part,
    the extra and its pins (from the package's descriptor), not a trace from deep inside."""
    out = subprocess.run(
        [sys.executable, "-c", IMPORT_WITHOUT, refused, module],
        capture_output=True,
        text=True,
        env=python_env(),
        timeout=120,
    )
    assert out.returncode != 0
    last = out.stderr.strip().splitlines()[-1]
    assert (
        last.startswith("ModuleNotFoundError: ") and f"{module} needs the '{extra}' extra" in last
    )
    assert all(f"'{pin}'" in last for pin in descriptor.PARTS[extra].requires)
