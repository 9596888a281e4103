"""The generator stays readable: no function over 80 lines, no module over 600."""

from __future__ import annotations

import ast

from testkit.gen import REPO

GENERATOR = REPO / "generator"


def test_function_and_module_sizes() -> None:
    too_long = []
    for path in sorted(GENERATOR.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if len(text.splitlines()) > 600:
            too_long.append(f"{path.name}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > 80:
                    too_long.append(f"{path.name}:{node.lineno} {node.name}: {lines} lines")
    assert not too_long, too_long
