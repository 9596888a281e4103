"""The shape of the code: small functions and modules, a copied runtime that takes every
protocol fact from the generated modules instead of spelling it, and a repository that stands
alone (no tracked file reads or links a folder beside it)."""

from __future__ import annotations

import ast
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_tasks import errors, protocol

REPO = Path(__file__).resolve().parents[1]
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 600
#: The error machinery every generated ``errors`` module builds on.
ERROR_MACHINERY = REPO / "templates" / "bindings" / "_errors.py"


def hand_written_runtime() -> list[Path]:
    """The hand-written modules the generator copies verbatim into every package."""
    return sorted(
        p
        for p in (REPO / "templates").rglob("*.py")
        if p != REPO / "templates" / "__init__.py"  # the generator's own package marker
    )


#: Not hand-written Python of this repository: the generated package, the spec examples the
#: tests read, build output; and below any folder, virtualenvs and tool caches (``.venv*``,
#: ``.git``, ...), npm trees and ``*.egg-info``.
NOT_HAND_WRITTEN = {"generated", "tests/fixtures", "build", "dist"}


def _skipped(folder: Path, name: str) -> bool:
    relative = (folder / name).relative_to(REPO).as_posix()
    return (
        name.startswith(".")
        or name in ("node_modules", "__pycache__")
        or name.endswith(".egg-info")
        or relative in NOT_HAND_WRITTEN
    )


def hand_written() -> list[Path]:
    """Every hand-written Python module of the repository: the generator, the runtime
    templates, the benchmarks, the build backend, the tests and their kit."""
    found = []
    for folder, dirs, files in os.walk(REPO):
        here = Path(folder)
        dirs[:] = [d for d in dirs if not _skipped(here, d)]
        found += [here / f for f in files if f.endswith(".py")]
    return sorted(found)


def rel(path: Path) -> str:
    return str(path.relative_to(REPO))


@pytest.mark.parametrize("path", hand_written(), ids=rel)
def test_module_size(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_MODULE_LINES, f"{rel(path)} has {lines} lines (at most {MAX_MODULE_LINES})"


@pytest.mark.parametrize("path", hand_written(), ids=rel)
def test_function_size(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    long = [
        f"{node.name} ({node.end_lineno - node.lineno + 1} lines, line {node.lineno})"
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert not long, f"{rel(path)}: functions over {MAX_FUNCTION_LINES} lines: {long}"


def _facts() -> dict[str, str]:
    """Every string the runtime must take from the generated modules, with what it is."""
    facts = {str(s.value): "a status" for s in protocol.STATUSES}
    for name in dir(protocol):
        value = getattr(protocol, name)
        if name.isupper() and isinstance(value, str) and "/" in value:
            facts[value] = f"a method (protocol.{name})"
    facts.update({m: "a method" for m in protocol.SERVER_REQUEST_METHODS if "/" in m})
    facts[protocol.REVISION] = "the protocol revision (protocol.REVISION)"
    return facts


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(
            node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
        ) and ast.get_docstring(node, clean=False):
            ids.add(id(node.body[0].value))  # type: ignore[attr-defined]
    return ids


def _literals(tree: ast.AST) -> Iterator[tuple[int, object]]:
    skip = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and id(node) not in skip:
            yield node.lineno, node.value
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            if isinstance(node.operand, ast.Constant) and isinstance(node.operand.value, int):
                yield node.lineno, -node.operand.value


def test_runtime_spells_no_protocol_fact() -> None:
    """Statuses, method names, the revision, taskSupport values and JSON-RPC error codes come
    from ``protocol`` and ``errors``: a schema that renames one changes the generated
    modules, never the copied runtime."""
    facts = _facts()
    support = set(protocol.TASK_SUPPORT_VALUES)
    codes = {cls.code for cls in errors.ERRORS.values()}
    found = []
    for path in hand_written_runtime():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for line, value in _literals(tree):
            if isinstance(value, str) and value in facts:
                found.append(f"{rel(path)}:{line}: {value!r} is {facts[value]}")
            elif isinstance(value, str) and value in support:
                found.append(f"{rel(path)}:{line}: {value!r} is a taskSupport value")
            elif (
                isinstance(value, int)
                and not isinstance(value, bool)
                and value in codes
                and path != ERROR_MACHINERY  # names JSON-RPC's own generic code, once
            ):
                found.append(f"{rel(path)}:{line}: {value} is a JSON-RPC error code")
    assert not found, "protocol facts spelled in the copied runtime:\n" + "\n".join(found)


def _imports(path: Path, module: str, modules: set[str]) -> set[str]:
    """The package modules ``module`` imports (at any depth of the file; imports under
    ``if TYPE_CHECKING:`` only name types, and do not count)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for inner in ast.walk(node)
    }
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom):
            parts = package.split(".")
            base = parts[: len(parts) - node.level + 1] if node.level else []
            target = ".".join([*base, *([node.module] if node.module else [])])
            names = [target, *(f"{target}.{alias.name}" for alias in node.names)]
            out |= {name for name in names if name in modules and name != module}
        elif isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names if alias.name in modules}
    return out


def test_no_import_cycle_in_the_generated_package() -> None:
    """No module of the generated package imports, directly or not, one that imports it
    (the runtime's rooms, the front doors, the clients and the CLI included)."""
    root = REPO / "generated" / "mcp_tasks"
    paths = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        paths[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {m: _imports(p, m, set(paths)) for m, p in paths.items()}
    cycles = []
    for start in sorted(graph):
        stack, seen = [(start, (start,))], set()
        while stack:
            node, trail = stack.pop()
            for nxt in sorted(graph[node]):
                if nxt == start:
                    cycles.append(" -> ".join((*trail, start)))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, (*trail, nxt)))
    assert not cycles, "import cycles:\n" + "\n".join(sorted(set(cycles))[:20])


#: a path that leaves the repository for the folder named shared beside it: relative (dot dot,
#: slash), or by a parent of the repository's path and the folder's name as a string
_OUTSIDE = re.compile(r"\.\./shared" "|" r'parents?[^"]{0,40}"shared"')


def test_no_tracked_file_reads_or_links_outside_the_repository() -> None:
    """A stranger's clone has nothing beside it: what the project is built and tested on (the
    official schemas, the rules digests) lives in it (``schema/``, ``docs/spec/``)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.decode()
    found = []
    for rel in filter(None, listed.split("\0")):
        path = REPO / rel
        if rel.endswith("schema.json") or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        found += [
            f"{rel}:{n}" for n, line in enumerate(text.splitlines(), 1) if _OUTSIDE.search(line)
        ]
    assert not found, "tracked lines reading or linking outside the repository: " + ", ".join(found)


def _imported_roots(tree: ast.Module) -> set[str]:
    """The top-level names of every absolute import in ``tree``, at any depth (an import
    inside a function is still a requirement of its module), but for those guarded by
    ``except ImportError``."""
    guarded: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
            isinstance(h.type, ast.Name) and h.type.id in ("ImportError", "ModuleNotFoundError")
            for h in node.handlers
        ):
            guarded |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    roots = set()
    for node in ast.walk(tree):
        if id(node) in guarded:
            continue
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def _installed_by(requirements: list[str]) -> set[str]:
    """The import names the distributions of ``requirements`` install, with everything they
    require in turn (their own extras left out)."""
    import importlib.metadata as md

    from packaging.requirements import Requirement

    by_dist: dict[str, set[str]] = {}
    for name, dists in md.packages_distributions().items():
        for dist in dists:
            by_dist.setdefault(dist.lower().replace("_", "-"), set()).add(name)
    seen: set[str] = set()
    todo = [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        dist = req.name.lower().replace("_", "-")
        if dist in seen:
            continue
        seen.add(dist)
        try:
            todo += [Requirement(r) for r in md.requires(dist) or ()]
        except md.PackageNotFoundError:
            continue
    return {name for dist in seen for name in by_dist.get(dist, ())}


def test_every_module_imports_only_what_its_part_installs() -> None:
    """A vendored runtime installed with only its bindings' and runtime's requirements (the
    mcp extra) imports every module of those parts: a module that needs redis, pydocket or
    prometheus_client belongs to the part that installs it (the descriptor's PARTS)."""
    import sys

    from mcp_tasks import descriptor

    root = REPO / "generated" / "mcp_tasks"
    base = [*descriptor.PARTS["bindings"].requires, *descriptor.PARTS["runtime"].requires]
    allowed = {part: _installed_by([*base, *p.requires]) for part, p in descriptor.PARTS.items()}
    wrong = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        part = descriptor.part_of(relative)
        roots = _imported_roots(ast.parse(path.read_text(), str(path)))
        foreign = roots - allowed[part] - set(sys.stdlib_module_names) - {"mcp_tasks", "__future__"}
        wrong += [f"{relative} ({part}) imports {name}" for name in sorted(foreign)]
    assert not wrong, "\n".join(wrong)
