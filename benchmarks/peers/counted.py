"""Our example server with its store's round trips counted, for the benchmark's count rows.

    python counted.py COUNTS.json -m mcp_tasks.examples.server --http HOST:PORT --store ...

Runs the module as ``python -m`` would, after wrapping what sends to the store:

- SQLite: every connection the process opens traces its statements
  (``sqlite3.Connection.set_trace_callback``): ``statements`` counts them, ``commits`` the
  ``COMMIT`` among them;
- Redis: the store's one sending point, ``ScriptRunner._send`` (one call = one pipeline =
  one round trip; a script call is one command): ``pipelines`` and ``commands``.

On ``SIGUSR1`` the counts so far are written to ``COUNTS.json`` (``seq`` says which
request it answers). The trace costs CPU, so the benchmark counts on a process of its own,
never in a timed window. It works on any checkout's ``generated/`` (``--before``): both
name the same sending point.
"""

from __future__ import annotations

import json
import os
import runpy
import signal
import sqlite3
import sys
from typing import Any

COUNTS: dict[str, int] = {"statements": 0, "commits": 0, "pipelines": 0, "commands": 0, "seq": 0}


def _trace(sql: str) -> None:
    COUNTS["statements"] += 1
    if sql.lstrip()[:6].upper() == "COMMIT":
        COUNTS["commits"] += 1


_connect = sqlite3.connect


def _counting_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
    conn = _connect(*args, **kwargs)
    conn.set_trace_callback(_trace)
    return conn


def _count_redis() -> None:
    try:
        from mcp_tasks.runtime.stores.redis import scripting
    except ImportError:  # no Redis store in this runtime
        return
    send = scripting.ScriptRunner._send

    async def counting_send(self: Any, calls: list[Any]) -> list[Any]:
        COUNTS["pipelines"] += 1
        COUNTS["commands"] += len(calls)
        return await send(self, calls)

    scripting.ScriptRunner._send = counting_send  # type: ignore[method-assign]


def main() -> None:
    path, flag, module, *rest = sys.argv[1:]
    assert flag == "-m", "usage: counted.py COUNTS.json -m MODULE ARGS..."

    def dump(_signum: int, _frame: Any) -> None:
        COUNTS["seq"] += 1
        tmp = f"{path}.tmp"
        with open(tmp, "w") as fh:
            json.dump(COUNTS, fh)
        os.replace(tmp, path)

    signal.signal(signal.SIGUSR1, dump)
    sqlite3.connect = _counting_connect  # type: ignore[assignment]
    _count_redis()
    sys.argv = [module, *rest]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
