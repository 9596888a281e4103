"""Import time of the runtime, against the SDK it stands on, in the same run.

    .venv/bin/python benchmarks/bench_import.py [--runs 7]

Each import runs in a fresh interpreter (``python -X importtime -c "import X"``), ``--runs``
times; the median of each is printed with its ratio to importing the SDK alone (``mcp``'s
server and client, which ``runtime.mcp_server`` cannot do without), and then, from the
median run of ``runtime.mcp_server``, where the time goes: the modules of this package
with their own (``self``) cost, largest first, and the share of the whole that is the
SDK's. A machine whose cores are busy stretches every figure alike; the ratios are what to
compare between runs.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys

#: (label, the import statement) in the order printed
IMPORTS = [
    ("python (no import)", "pass"),
    ("the SDK: mcp server + client", "import mcp.server.mcpserver, mcp.client.session"),
    ("mcp_tasks.protocol (the facts)", "import mcp_tasks.protocol"),
    ("mcp_tasks.runtime (engine, stores)", "import mcp_tasks.runtime"),
    ("mcp_tasks.runtime.serve.server", "import mcp_tasks.runtime.serve.server"),
    ("mcp_tasks.runtime.client.requestor", "import mcp_tasks.runtime.client.requestor"),
    ("mcp_tasks.cli (mcptask)", "import mcp_tasks.cli"),
]
_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)")


def one_run(statement: str) -> tuple[float, list[tuple[str, int, int, int]]]:
    """Seconds for ``statement`` in a fresh interpreter, and its importtime rows
    (module, self µs, cumulative µs, depth)."""
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", statement],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    rows = [
        (m[4], int(m[1]), int(m[2]), len(m[3]))
        for m in map(_LINE.match, out.stderr.splitlines())
        if m is not None
    ]
    total = sum(cum for _, _, cum, depth in rows if depth == 1)
    return total / 1e6, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    print(f"{platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores,")
    print(f"load average {os.getloadavg()[0]:.1f}; median of {args.runs} fresh interpreters")
    medians: dict[str, float] = {}
    rows_of_median: list[tuple[str, int, int, int]] = []
    for label, statement in IMPORTS:
        runs = [one_run(statement) for _ in range(args.runs)]
        runs.sort(key=lambda r: r[0])
        seconds, rows = runs[len(runs) // 2]
        medians[label] = statistics.median(r[0] for r in runs)
        if statement == "import mcp_tasks.runtime.serve.server":
            rows_of_median = rows
    sdk = medians["the SDK: mcp server + client"]
    print(f"\n{'import':40} {'seconds':>8} {'/ SDK':>7}")
    for label, _ in IMPORTS:
        print(f"{label:40} {medians[label]:8.3f} {medians[label] / sdk:7.2f}")
    ours = sorted(
        ((name, own) for name, own, _, _ in rows_of_median if name.startswith("mcp_tasks")),
        key=lambda r: -r[1],
    )
    whole = sum(own for _, own, _, _ in rows_of_median)
    sdk_own = sum(
        own for name, own, _, _ in rows_of_median if name.split(".")[0] in ("mcp", "mcp_types")
    )
    print(f"\nruntime.mcp_server: {whole / 1e6:.3f} s in all, the SDK's modules {sdk_own / whole:.0%},")
    print(f"this package's {sum(o for _, o in ours) / whole:.0%}; its largest (own time):")
    for name, own in ours[:8]:
        print(f"  {own / 1e3:8.1f} ms  {name}")


if __name__ == "__main__":
    main()
