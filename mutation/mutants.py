"""The mutants of ``run.py``: AST-level for Python, token-level for the Redis store's Lua
scripts (what each changes: ``README.md`` beside this file); which lines changed since a git
revision; which template a generated file comes from."""

from __future__ import annotations

import ast
import copy
import hashlib
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = "generated/mcp_tasks/"
TEMPLATES = "templates/vendored/"


@dataclass
class Mutant:
    path: str  # repository-relative
    line: int  # 1-based, in the mutated file
    what: str  # e.g. "< -> <="
    source: str = field(repr=False)  # the whole mutated file
    text: str = ""  # the original line, stripped

    @property
    def key(self) -> str:
        return hashlib.sha1(f"{self.path}\0{self.line}\0{self.what}".encode()).hexdigest()[:10]


_CMP_FLIP: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
_CMP_TEXT: dict[type[ast.cmpop], str] = {
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.In: "in",
    ast.NotIn: "not in",
    ast.Is: "is",
    ast.IsNot: "is not",
}
_LOG_CALLS = {"debug", "info", "warning", "error", "exception", "critical", "log"}


def _skipped(tree: ast.Module) -> set[int]:
    """ids of the nodes never mutated: annotations, docstrings, asserts, f-strings,
    ``__all__``, ``if TYPE_CHECKING:`` blocks, and everything inside them."""
    out: set[int] = set()

    def skip(node: ast.AST | None) -> None:
        if node is not None:
            out.update(id(n) for n in ast.walk(node))

    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            skip(node.returns)
            every = [*node.args.args, *node.args.posonlyargs, *node.args.kwonlyargs]
            every += [a for a in (node.args.vararg, node.args.kwarg) if a is not None]
            for a in every:
                skip(a.annotation)
        if isinstance(node, ast.AnnAssign):
            skip(node.annotation)
        if isinstance(node, (ast.Assert, ast.JoinedStr)):
            skip(node)
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            skip(node)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip(node)
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            first = body[0].value
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                skip(body[0])
    return out


def _is_log_call(node: ast.expr) -> bool:
    call = node.value if isinstance(node, ast.Await) else node
    if not isinstance(call, ast.Call):
        return False
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name in _LOG_CALLS


def _variants(node: ast.AST) -> Iterator[tuple[ast.AST, str]]:
    """(replacement node, description) for each mutation of ``node`` itself."""
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            flip = _CMP_FLIP.get(type(op))
            if flip is not None:
                cmp = copy.deepcopy(node)
                cmp.ops[i] = flip()
                yield cmp, f"{_CMP_TEXT[type(op)]} -> {_CMP_TEXT[flip]}"
    elif isinstance(node, ast.BoolOp):
        boolop = copy.deepcopy(node)
        boolop.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        yield boolop, "and -> or" if isinstance(node.op, ast.And) else "or -> and"
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield copy.deepcopy(node.operand), "not x -> x"
    elif isinstance(node, ast.Constant):
        if isinstance(node.value, bool):
            yield ast.Constant(not node.value), f"{node.value} -> {not node.value}"
        elif isinstance(node.value, int):
            yield ast.Constant(node.value + 1), f"{node.value} -> {node.value + 1}"
            yield ast.Constant(node.value - 1), f"{node.value} -> {node.value - 1}"
    elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        binop = copy.deepcopy(node)
        binop.op = ast.Sub() if isinstance(node.op, ast.Add) else ast.Add()
        yield binop, "+ -> -" if isinstance(node.op, ast.Add) else "- -> +"
    elif isinstance(node, ast.AugAssign) and isinstance(node.op, (ast.Add, ast.Sub)):
        sign = "+=" if isinstance(node.op, ast.Add) else "-="
        yield ast.Assign([node.target], node.value, lineno=node.lineno), f"{sign} -> ="
    elif isinstance(node, ast.Return) and node.value is not None:
        if not (isinstance(node.value, ast.Constant) and node.value.value is None):
            yield ast.Return(ast.Constant(None)), "return X -> return None"
    elif isinstance(node, ast.Expr) and not _is_log_call(node.value):
        if isinstance(node.value, (ast.Call, ast.Await)):
            yield ast.Pass(), "statement dropped"
    elif isinstance(node, ast.Raise):
        yield ast.Pass(), "raise dropped"


def _splice(lines: list[bytes], node: ast.AST, text: str, expr: bool) -> str:
    """The file with ``node``'s span replaced by ``text`` (positions are UTF-8 offsets)."""
    sl, sc = node.lineno - 1, node.col_offset  # type: ignore[attr-defined]
    el, ec = node.end_lineno - 1, node.end_col_offset  # type: ignore[attr-defined]
    new = text.encode()
    if expr:
        new = b"(" + new + b")"
    out = lines[:sl] + [lines[sl][:sc] + new + lines[el][ec:]] + lines[el + 1 :]
    return b"".join(out).decode()


def python_mutants(path: str) -> Iterator[Mutant]:
    source = (ROOT / path).read_text()
    tree = ast.parse(source)
    before = ast.dump(tree)
    lines = source.encode().splitlines(keepends=True)
    skipped = _skipped(tree)
    for node in ast.walk(tree):
        if id(node) in skipped or not hasattr(node, "lineno"):
            continue
        for new, what in _variants(node):
            is_stmt = isinstance(node, ast.stmt)
            mutated = _splice(lines, node, ast.unparse(new), expr=not is_stmt)
            try:
                after = ast.dump(ast.parse(mutated))
            except SyntaxError:
                continue
            if after != before:
                text = lines[node.lineno - 1].decode().strip()
                yield Mutant(path, node.lineno, what, mutated, text)


_LUA_SWAPS = [
    (r"(?<![<>=~])>=", ">"),
    (r"(?<![<>=~])>(?!=)", ">="),
    (r"(?<![<>=~])<=", "<"),
    (r"(?<![<>=~])<(?!=)", "<="),
    (r"==", "~="),
    (r"~=", "=="),
    (r"\band\b", "or"),
    (r"\bor\b", "and"),
    (r"\bnot ", ""),
]
_LUA_NUMBER = re.compile(r"(?<![\w.\[])(\d+)(?![\w.\]])")
_LUA_CALL_STMT = re.compile(
    r"(^\s*|\bthen\s+|\bdo\s+|\belse\s+)(redis\.call\([^()]*(?:\([^()]*\)[^()]*)*\))"
)


def _lua_edits(code: str) -> Iterator[tuple[str, str]]:
    """(the code of a line mutated, description) for each mutant of one line of Lua (its
    code without the comment); strings ('...') are left alone."""
    parts = re.split(r"('[^']*')", code)
    col = 0
    for j, part in enumerate(parts):
        at, col = col, col + len(part)
        if j % 2:
            continue
        edits: list[tuple[int, int, str, str]] = []
        for pattern, repl in _LUA_SWAPS:
            for m in re.finditer(pattern, part):
                what = f"{m.group().strip()} -> {repl or '(dropped)'}"
                edits.append((m.start(), m.end(), repl, what))
        for m in _LUA_NUMBER.finditer(part):
            n = int(m.group(1))
            for k in (n + 1, n - 1):
                edits.append((m.start(1), m.end(1), str(k), f"{n} -> {k}"))
        for start, end, repl, what in edits:
            new = part[:start] + repl + part[end:]
            yield "".join([*parts[:j], new, *parts[j + 1 :]]), f"{what} @{at + start + 1}"
    for m in _LUA_CALL_STMT.finditer(code):
        yield code[: m.start(2)] + "do end" + code[m.end(2) :], f"{m.group(2)[:40]} dropped"


def lua_mutants(path: str) -> Iterator[Mutant]:
    """Token-level mutants of a Lua script, outside comments and strings."""
    lines = (ROOT / path).read_text().splitlines(keepends=True)
    for i, line in enumerate(lines):
        body = line.rstrip("\n")
        code, sep, comment = body.partition("--")
        if not code.strip():
            continue
        for new_code, what in _lua_edits(code):
            new_line = new_code + sep + comment + line[len(body) :]
            text = "".join([*lines[:i], new_line, *lines[i + 1 :]])
            yield Mutant(path, i + 1, what, text, line.strip())


def mutants_of(spec: str) -> Iterator[Mutant]:
    for path in sorted(ROOT.glob(spec)):
        rel = str(path.relative_to(ROOT))
        yield from (lua_mutants(rel) if rel.endswith(".lua") else python_mutants(rel))


def changed_lines(path: str, rev: str) -> set[int]:
    """Lines of ``path`` (as it is now) changed since ``rev``, committed or not."""
    diff = subprocess.run(
        ["git", "diff", "-U0", rev, "--", path],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    out: set[int] = set()
    for m in re.finditer(r"^@@ -\S+ \+(\d+)(?:,(\d+))? @@", diff, re.M):
        start, count = int(m.group(1)), int(m.group(2) or "1")
        out.update(range(start, start + count))
    return out


def template_of(path: str) -> tuple[str, int]:
    """The source of truth of a generated file and the line offset between the two."""
    if not path.startswith(PKG):
        return path, 0
    tpl = TEMPLATES + path[len(PKG) :]
    if not (ROOT / tpl).exists():
        return path, 0
    gen, src = (ROOT / path).read_text(), (ROOT / tpl).read_text()
    if gen.endswith(src):
        return tpl, gen[: len(gen) - len(src)].count("\n")
    return path, 0
