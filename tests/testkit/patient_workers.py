"""``python -m testkit.patient_workers ARGS...``: the example server's command
(``mcp_tasks.examples.server``), whose ``--workers`` parent allows a worker
:data:`STARTUP_S` seconds, instead of ``workers.STARTUP_S`` (5 s), to start before it takes
the worker's exit for a failed start.

On a loaded test machine a worker may take longer than 5 s just to import the server:
one that cannot start (its store unreachable) then exits after the parent's window, looks
like a worker that crashed while serving, and is replaced at once again and again instead
of counting towards the parent giving up. Everything else is the example server's own code
path.
"""

from __future__ import annotations

import sys
from typing import Any

from mcp_tasks.examples import workers
from mcp_tasks.examples.server import main

#: Seconds a worker has to start: generous, a deadline rather than a guess.
STARTUP_S = 600.0


def _patient(*args: Any, **kwargs: Any) -> int:
    kwargs.setdefault("startup_s", STARTUP_S)
    return serve_workers(*args, **kwargs)


serve_workers = workers.serve_workers

if __name__ == "__main__":
    workers.serve_workers = _patient  # the server's --workers path imports it when it runs
    main(sys.argv[1:])
