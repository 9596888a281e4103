"""Wall time of a full generation of the pinned schemas (2025-11-25 and the tasks extension,
one package with two faces; formatting included) and of --check, next to plain
datamodel-codegen runs on the same full schemas measured in the same run; the same for
2025-11-25 alone; and the import time of the generated package next to ``import pydantic``.

    .venv/bin/python benchmarks/bench_generate.py [--repeat N] [--quick]

Each figure is the median of N runs of a fresh process. Our two packages are byte-compiled
first (``compileall``), as ``pip install`` leaves them and as datamodel-codegen and pydantic
already are in site-packages: an editable checkout under ``PYTHONDONTWRITEBYTECODE=1`` would
otherwise recompile them from source on every run, which no installed copy does. "cold" runs every step (no cache);
"warm" answers datamodel-codegen and black from mcptask-gen's content-addressed cache, as a
regeneration of an unchanged schema does. Targets: generation at most
0.5x the plain datamodel-codegen run; importing the generated package at most 2x pydantic.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "schema" / "2025-11-25" / "schema.json"
EXT_SCHEMA = REPO / "schema" / "ext-tasks-2026-07-28" / "schema.json"
SCHEMAS = (SCHEMA, EXT_SCHEMA)
BIN = Path(sys.executable).parent

IMPORT_PYDANTIC = "import pydantic; pydantic.BaseModel"
IMPORT_PKG = (
    "import mcp_tasks.core.models, mcp_tasks.core.methods, mcp_tasks.core.capabilities, mcp_tasks.lifecycle, "
    "mcp_tasks.errors, mcp_tasks.core.meta, mcp_tasks.store, mcp_tasks.core.handlers"
)


def wall(
    cmd: list[str], repeat: int, before: object = None, env: dict[str, str] | None = None
) -> float:
    times = []
    for _ in range(repeat):
        if callable(before):
            before()
        t = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, env=env)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def import_time(stmt: str, repeat: int, cwd: Path) -> float:
    """Median in-process time of ``stmt`` in a fresh interpreter (interpreter start excluded)."""
    code = f"import time; t = time.perf_counter(); {stmt}; print(time.perf_counter() - t)"
    times = []
    for _ in range(repeat):
        out = subprocess.run(
            [sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=cwd
        )
        times.append(float(out.stdout.strip()))
    return statistics.median(times)


def byte_compile() -> list[str]:
    """Compile the generator and the generated package the way an install does."""
    import compileall
    import importlib.util

    done = []
    for name in ("mcptask_gen", "mcp_tasks"):
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            continue
        root = Path(spec.origin).parent
        compileall.compile_dir(str(root), quiet=1)
        done.append(f"{name} ({root})")
    return done


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="one run each (smoke test)")
    args = parser.parse_args()
    repeat = 1 if args.quick else args.repeat
    compiled = byte_compile()
    tmp = Path(tempfile.mkdtemp(prefix="bench-generate-"))
    try:
        out = tmp / "mcp_tasks"
        gen = [str(BIN / "mcptask-gen"), *map(str, SCHEMAS), "-o", str(out)]
        gen_one = [str(BIN / "mcptask-gen"), str(SCHEMA), "-o", str(out)]

        def clean() -> None:
            shutil.rmtree(out, ignore_errors=True)

        cold_env = dict(os.environ, MCPTASK_GEN_NO_CACHE="1")
        warm_env = dict(os.environ, MCPTASK_GEN_CACHE_DIR=str(tmp / "cache"))
        ours = wall(gen, repeat, before=clean, env=cold_env)
        check = wall([*gen, "--check"], repeat, env=cold_env)
        ours_one = wall(gen_one, repeat, before=clean, env=cold_env)
        clean()
        subprocess.run(gen, check=True, capture_output=True, env=warm_env)  # fills the cache
        ours_warm = wall(gen, repeat, before=clean, env=warm_env)
        check_warm = wall([*gen, "--check"], repeat, env=warm_env)
        plains = [wall(_plain(schema, tmp), repeat) for schema in SCHEMAS]
        plain, plain_one = sum(plains), plains[0]
        pyd = import_time(IMPORT_PYDANTIC, max(repeat, 3), tmp)
        pkg = import_time(IMPORT_PKG, max(repeat, 3), tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    rows = [
        ("mcptask-gen both schemas, cold (--no-cache)", ours, ours / plain, "<= 0.5"),
        ("mcptask-gen both schemas --check, cold (--no-cache)", check, check / plain, "<= 0.5"),
        ("mcptask-gen both schemas, warm cache", ours_warm, ours_warm / plain, "<= 0.5"),
        ("mcptask-gen both schemas --check, warm cache", check_warm, check_warm / plain, "<= 0.5"),
        ("baseline: plain datamodel-codegen, both full schemas", plain, 1.0, ""),
        ("mcptask-gen 2025-11-25 only, cold (--no-cache)", ours_one, ours_one / plain_one, "<= 0.5"),
        ("baseline: plain datamodel-codegen, 2025-11-25 full schema", plain_one, 1.0, ""),
        ("import of the generated package (8 modules)", pkg, pkg / pyd, "<= 2.0"),
        ("baseline: import pydantic (pydantic.BaseModel)", pyd, 1.0, ""),
    ]
    print(f"median of {repeat} run(s); python {sys.version.split()[0]}; load average {_load()}")
    print(f"byte-compiled first: {', '.join(compiled) or 'nothing found'}")
    print(f"{'measure':62} {'seconds':>9} {'ratio':>7}  target")
    for name, secs, ratio, target in rows:
        print(f"{name:62} {secs:9.3f} {ratio:7.2f}  {target}")


def _plain(schema: Path, tmp: Path) -> list[str]:
    """Plain datamodel-codegen, its defaults, on one full schema."""
    return [
        str(BIN / "datamodel-codegen"),
        "--input",
        str(schema),
        "--input-file-type",
        "jsonschema",
        "--output-model-type",
        "pydantic_v2.BaseModel",
        "--output",
        str(tmp / f"full_models_{schema.parent.name}.py"),
    ]


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


if __name__ == "__main__":
    main()
