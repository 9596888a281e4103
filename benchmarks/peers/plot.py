"""Draw the benchmark's PNGs from its JSON: ``python plot.py RESULTS.json OUT_DIR``.

Run with the benchmark virtualenv (``benchmarks/peers/.venv-mcp129``, which holds
matplotlib); prints the files written.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.ticker import ScalarFormatter

COLORS = {
    "ts": "#3178c6",
    "mcp129": "#8c564b",
    "floor": "#7f7f7f",
    "floor-sdk": "#bcbd22",
    "ours-memory": "#2ca02c",
    "ours-sqlite": "#d62728",
    "ours-redis": "#9467bd",
}


def main() -> None:
    report = json.loads(Path(sys.argv[1]).read_text())
    out = Path(sys.argv[2])
    labels = {s["name"]: s["label"] for s in report["servers"]}
    runs = report["runs"]
    written = []

    # Wake-up lateness: empirical CDF of every sample of every repetition, log x.
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for name, reps in runs["wakeup"].items():
        samples = sorted(max(v, 0.01) for r in reps for v in r["samples"])
        if not samples:
            continue
        ys = [(i + 1) / len(samples) for i in range(len(samples))]
        ax.step(samples, ys, where="post", label=labels.get(name, name), color=COLORS.get(name))
    ax.axvline(5, color="black", linestyle=":", linewidth=1)
    ax.axhline(0.99, color="black", linestyle=":", linewidth=0.6)
    ax.text(5, 0.5, " target: p99 < 5 ms", fontsize=8)
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(ScalarFormatter())
    ax.tick_params(axis="x", which="minor", labelsize=7)
    ax.set_xlabel("tasks/result answer after the work ended (ms, log)")
    ax.set_ylabel("fraction of calls")
    ax.set_title(
        f"Wake-up lateness, slow_compute({report['plan']['wake_seconds']:g}) → tasks/result"
    )
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    path = out / "wakeup.png"
    fig.savefig(path, dpi=110)
    written.append(str(path))

    # tasks/list first page (and whole walk) against N, log-log.
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.8))
    for name, row in report["aggregate"].items():
        ns = sorted(
            {
                int(k.split(".")[1])
                for k in row
                if k.startswith("list.") and k.endswith("first_page_ms")
            }
        )
        if not ns:
            continue
        for ax, key in zip(axes, ("first_page_ms", "walk_ms"), strict=True):
            ys = [row.get(f"list.{n}.{key}") for n in ns]
            pts = [(n, y) for n, y in zip(ns, ys, strict=True) if y is not None]
            ax.plot(
                [p[0] for p in pts],
                [p[1] for p in pts],
                marker="o",
                label=labels.get(name, name),
                color=COLORS.get(name),
            )
    axes[0].axhline(2, color="black", linestyle=":", linewidth=1)
    axes[0].set_title("tasks/list first page")
    axes[1].set_title("tasks/list whole walk (every page)")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("retained tasks in the session (log)")
        ax.set_ylabel("ms (log)")
        ax.grid(True, which="both", alpha=0.3)
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncol=4, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    path = out / "list_pages.png"
    fig.savefig(path, dpi=110)
    written.append(str(path))
    print(" ".join(written))


if __name__ == "__main__":
    main()
