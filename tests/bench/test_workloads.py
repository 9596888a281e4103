"""The peers benchmark's measuring loop, in-process: what it counts per operation."""

from __future__ import annotations

import asyncio
import importlib
from pathlib import Path
from typing import Any

import pytest

PEERS = Path(__file__).resolve().parents[2] / "benchmarks" / "peers"


class _NoServer:
    """Stands in for a started server: the loop reads its CPU time at the window's edges."""

    def cpu_s(self) -> float:
        return 0.0


def test_a_step_s_count_is_kept_for_the_steps_measured_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A per-operation count a step returns (the extension lifecycle's ``tasks/get`` per
    task) is kept for the steps whose latency is kept, those that ended inside the window:
    never also those of the warm-up and the tail, which made a table show 1.3 gets per task
    where each task took one."""
    # the benchmark's modules import their siblings by name, as peers_bench.py runs them;
    # pytest puts the path back after the test
    monkeypatch.syspath_prepend(str(PEERS))
    workloads = importlib.import_module("workloads")
    ran = [0]

    async def step() -> int:
        await asyncio.sleep(0.005)
        ran[0] += 1
        return 1  # one get per task, every time

    outs: list[Any] = []
    plan = workloads.Plan(warmup_s=0.1, window_s=0.2)
    lat, _ = asyncio.run(workloads._loop(_NoServer(), plan, [step, step], outs=outs))  # type: ignore[arg-type]
    assert lat and len(outs) == len(lat)
    assert sum(outs) / len(outs) == 1.0
    assert ran[0] > len(outs)  # the warm-up's steps ran, and were not counted
