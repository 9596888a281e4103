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


def _import_nodes(tree: ast.Module) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement of ``tree``, each with whether it is deferred: inside a
    function or class, or under ``if TYPE_CHECKING:`` (an arrow the module's top hides)."""
    top = {id(node) for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, id(node) not in top


def _imports(
    path: Path, module: str, modules: set[str], *, deferred: bool | None = None
) -> set[str]:
    """The package modules ``module`` imports, at any depth of the file, ``TYPE_CHECKING``
    included (``deferred``: only those that are, or only those that are not)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()
    for node, late in _import_nodes(tree):
        if deferred is not None and late != deferred:
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


def _generated_modules() -> dict[str, Path]:
    """The generated package's modules by dotted name."""
    root = REPO / "generated" / "mcp_tasks"
    paths = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        paths[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return paths


def test_no_import_cycle_in_the_generated_package() -> None:
    """No module of the generated package imports, directly or not, one that imports it
    (the runtime's rooms, the front doors, the clients and the CLI included), counting the
    imports under ``TYPE_CHECKING`` and inside functions."""
    paths = _generated_modules()
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


#: the rooms of the runtime that know no transport: the task engine, the two wire faces, the
#: stores (what they import is the generated bindings, the store contract, each other)
_PURE_ROOMS = ("runtime/engine/", "runtime/faces/", "runtime/stores/")
#: the rooms that speak MCP over the SDK: its one door (``sdk/``) and the clients
_SDK_ROOMS = ("runtime/sdk/", "runtime/client/")


def _runtime_files() -> Iterator[tuple[str, ast.Module]]:
    root = REPO / "generated" / "mcp_tasks"
    for path in sorted((root / "runtime").rglob("*.py")):
        yield path.relative_to(root).as_posix(), ast.parse(path.read_text(encoding="utf-8"))


def test_engine_faces_and_stores_know_no_transport() -> None:
    """``engine/``, ``faces/`` and ``stores/`` import neither the SDK (``mcp``, ``mcp_types``)
    nor starlette, nor the rooms that serve, call or adapt the SDK."""
    wrong = []
    for relative, tree in _runtime_files():
        if not relative.startswith(_PURE_ROOMS):
            continue
        foreign = _imported_roots(tree) & {"mcp", "mcp_types", "starlette"}
        wrong += [f"{relative} imports {name}" for name in sorted(foreign)]
        for node, _ in _import_nodes(tree):
            if isinstance(node, ast.ImportFrom) and node.level >= 2 and node.module:
                room = node.module.split(".")[0]
                if node.level == 2 and room in ("serve", "client", "sdk"):
                    wrong.append(f"{relative} imports runtime.{node.module}")
    assert not wrong, "\n".join(wrong)


def test_only_sdk_and_client_import_the_sdk() -> None:
    """The ``mcp`` SDK (``mcp``, ``mcp_types``) is imported by ``sdk/`` and the clients
    only: every other room takes what it uses of it from ``sdk/``."""
    wrong = []
    for relative, tree in _runtime_files():
        if relative.startswith(_SDK_ROOMS):
            continue
        foreign = _imported_roots(tree) & {"mcp", "mcp_types"}
        wrong += [f"{relative} imports {name}" for name in sorted(foreign)]
    assert not wrong, "\n".join(wrong)


def test_only_sdk_names_a_private_sdk_attribute() -> None:
    """Every private name of the SDK the runtime relies on is one of ``sdk/``'s ASSUMPTIONS
    (each with its canary); no module outside ``sdk/`` names one, as an attribute, a string
    (``getattr``) or an import."""
    from mcp_tasks.runtime.sdk.assumptions import ASSUMPTIONS

    private = {name for what, *_ in ASSUMPTIONS for name in re.findall(r"\b(_[A-Za-z]\w*)", what)}
    private.discard("_meta")  # the protocol's own field, not an attribute of the SDK
    assert private, "ASSUMPTIONS names no private attribute: the pattern is stale"
    wrong = []
    for relative, tree in _runtime_files():
        if relative.startswith("runtime/sdk/"):
            continue
        for node in ast.walk(tree):
            named = (
                (isinstance(node, ast.Attribute) and node.attr in private)
                or (isinstance(node, ast.Constant) and node.value in private)
                or (isinstance(node, ast.alias) and node.name.split(".")[-1] in private)
                or (
                    isinstance(node, ast.ImportFrom)
                    and bool(set((node.module or "").split(".")) & private)
                )
            )
            if named:
                wrong.append(f"{relative}:{getattr(node, 'lineno', '?')}: {ast.unparse(node)}")
    assert not wrong, "\n".join(wrong)


def _face_bound() -> list[str]:
    """The output paths written only with the extension's face (templates/needs.toml)."""
    import tomllib

    needs = tomllib.loads((REPO / "templates" / "needs.toml").read_text())["needs"]
    return [prefix for prefix, kinds in needs.items() if "extension" in kinds]


def test_a_deferred_import_crosses_to_an_optional_module() -> None:
    """An import between runtime modules is at the importer's top, where the cycle test and a
    reader see it. Deferred (in a function, under ``TYPE_CHECKING``) only into a module a
    package may lack at run time: one of another part (redis, ops, workers: its requirements
    may not be installed) or one written only with the extension's face. No runtime module
    imports another by name (``importlib``)."""
    from mcp_tasks import descriptor

    paths = _generated_modules()
    root = REPO / "generated" / "mcp_tasks"
    face_bound = _face_bound()

    def where(module: str) -> str:
        return paths[module].relative_to(root).as_posix()

    wrong = []
    for module, path in sorted(paths.items()):
        source = where(module)
        if not source.startswith("runtime/"):
            continue
        for target in sorted(_imports(path, module, set(paths), deferred=True)):
            into = where(target)
            optional = descriptor.part_of(into) != descriptor.part_of(source) or any(
                into.startswith(prefix) for prefix in face_bound
            )
            if not optional:
                wrong.append(f"{source} defers importing {into}")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "import_module"
                and "__package__"
                in ast.unparse(node) + ast.unparse(node.args[0] if node.args else node)
            ):
                wrong.append(f"{source}:{node.lineno}: {ast.unparse(node)}")


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
