"""What a front door serves with: the narrow object each door takes, built by ``McpTasks``.

The doors (the SDK's pipeline in :mod:`.sdk_door`, the task endpoint in :mod:`.endpoint`, the
``subscriptions/listen`` handler in :mod:`.listen`) never hold the ``McpTasks`` that installs
them: they take this, and reach the router, the SDK's low-level server, the sessions and the
engine through it, so no door imports the class it serves."""

from __future__ import annotations

from collections.abc import Callable, Iterable, MutableMapping
from dataclasses import dataclass
from typing import Any, Final

from ..engine.task_engine import TaskEngine
from .router import Router
from .sessions import Sessions

__all__ = ["Serving", "mark_passed", "passed_params"]

#: the ASGI scope key of a ``tools/call`` the task endpoint routed and handed to the SDK:
#: the params the router passed (its ``task`` param left out)
_PASSED: Final = "mcp_tasks.passed"


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


def mark_passed(scope: MutableMapping[str, Any], params: dict[str, Any]) -> None:
    """The task endpoint routed this HTTP request's ``tools/call`` and hands it to the SDK
    with ``params``: the SDK's door does not route it again (a request is routed once)."""
    scope[_PASSED] = params


def passed_params(request: Any) -> dict[str, Any] | None:
    """The params the task endpoint's router passed for the SDK request ``request`` (a
    starlette ``Request``, or None off HTTP), or None when it did not route it."""
    scope = getattr(request, "scope", None)
    if not isinstance(scope, dict):
        return None
    params = scope.get(_PASSED)
    return params if isinstance(params, dict) else None
