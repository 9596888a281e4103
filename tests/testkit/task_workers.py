"""Worker processes (``python -m mcp_tasks.worker``) as real subprocesses, running the task
work of the example server's tools when it serves them ``--on-workers``; stopped by PID.

Not ``--workers N`` (``testkit.patient_workers``, ``tests/mcp/test_redis_workers.py``): those
are HTTP-serving processes on one port.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from testkit.procs import ChildProcess, python_env
from testkit.wait import until

WORKER_MODULE = "mcp_tasks.worker"
#: the example's app for workers
EXAMPLE_APP = "mcp_tasks.examples.server:worker_app"
#: what a worker logs once it takes jobs
READY_LINE = "running jobs from"
#: seconds for a worker to start (imports on a loaded 2-core machine)
STARTUP_TIMEOUT = 60.0


class WorkerProc(ChildProcess):
    """One worker subprocess on ``store`` (a ``redis://`` URL with the front ends'
    namespace); ``redelivery_s``: how long a dead worker's job waits for another."""

    def __init__(
        self, store: str, log_dir: Path, *, redelivery_s: float = 1.0, app: str = EXAMPLE_APP
    ) -> None:
        self.store = store
        self.log_dir = log_dir
        self.redelivery_s = redelivery_s
        self.app = app
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = log_dir / "worker.log"

    def command(self) -> list[str]:
        return [
            sys.executable, "-m", WORKER_MODULE, "--store", self.store,
            "--redelivery-timeout", str(self.redelivery_s), self.app,
        ]  # fmt: skip

    def start(self) -> WorkerProc:
        assert self.proc is None, "already running"
        n = len(list(self.log_dir.glob("worker-*.log")))
        self.log_path = self.log_dir / f"worker-{n}.log"
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, env=python_env()
            )
        proc = self.proc

        def ready() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(f"worker exited early:\n{self.log()}")
            return READY_LINE in self.log()

        until(ready, STARTUP_TIMEOUT, interval=0.1, what="the worker takes jobs")
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def runs_of(self, task_id: str) -> int:
        """How many times this worker started the tool of ``task_id`` (its log)."""
        return sum(1 for line in self.log().splitlines() if f"task {task_id}: running" in line)
