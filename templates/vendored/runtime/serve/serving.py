"""What a front door serves with: the narrow object each door takes, built by ``McpTasks``.

The doors (the SDK's pipeline in :mod:`.sdk_door`, the task endpoint in :mod:`.endpoint`, the
``subscriptions/listen`` handler in :mod:`.listen`) never hold the ``McpTasks`` that installs
them: they take this, and reach the router, the SDK's low-level server, the sessions and the
engine through it, so no door imports the class it serves."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..engine.task_engine import TaskEngine
from .router import Router
from .sessions import Sessions

__all__ = ["Serving"]


@dataclass(frozen=True, eq=False)
class Serving:
    """One server's serving parts, for its doors."""

    #: decides what each request is and answers the task methods
    router: Router
    #: the SDK's low-level ``Server`` (its handlers, its request context)
    server: Any
    #: the live sessions, by id
    sessions: Sessions
    #: the task engine
    engine: TaskEngine
    #: told each complete ``tools/list`` answer (a low-level ``Server``'s tools, known only then)
    tools_listed: Callable[[Iterable[str]], None]
