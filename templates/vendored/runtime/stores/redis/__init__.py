"""``RedisTaskStore``: tasks shared by many server instances through Redis (redis-py asyncio).

Install the ``redis`` extra. Usage::

    store = RedisTaskStore("redis://127.0.0.1:6379/0", namespace="mcp-tasks")
    async with TaskEngine(store) as engine:   # the engine starts the store's background work
        ...
    await store.close()

Where things are (one room each):

- ``store.py``      ``RedisTaskStore``: the ``TaskStore`` methods
- ``keys.py``       every key name, and the listing order (``lexkey``)
- ``codec.py``      a task as a Redis hash and back (the short field names)
- ``scripting.py``  every round trip: scripts, commands, pipelines; Redis errors become
                    ``StoreUnavailable`` (details to the log)
- ``scripts/*.lua`` the Lua scripts, one per file (``_prelude.lua`` is prepended to each)
- ``events.py``     pub/sub wake-ups across instances (``watch``)
- ``leases.py``     heartbeats and failing the tasks of dead instances (``recover``)
- ``inputs.py``     input requests handed between instances
- ``secret.py``     the listing-cursor secret shared by all instances
- ``admin.py``      operators' listing across requestors (``list_all``, ``NS:all``)
"""

from __future__ import annotations

from ...parts import require

require("redis", __name__, "redis")

from .events import TaskWatchHandle  # noqa: E402
from .store import RedisTaskStore  # noqa: E402

__all__ = ["RedisTaskStore", "TaskWatchHandle"]
