"""What an operator needs to run tasks in production: metrics in the Prometheus text format,
health probes, an admin API and a live dashboard, as one ASGI app (``OpsApp``), and the
pieces it is made of (``TaskMetrics``, ``AdminService``, ``TaskFeed``, ``views``).

``OpsApp`` and ``TaskMetrics`` need the ``ops`` extra (``prometheus_client``), imported only
when they are; the rest (used by ``mcptask admin`` too) needs nothing more. Every surface is
off unless configured, and each needs its own token (see ``app.py``).

- ``app.py``      ``OpsApp``: the paths, the tokens, the event stream
- ``metrics.py``  ``TaskMetrics``: what is counted, from which hook
- ``service.py``  ``AdminService``: list, show, count and cancel any requestor's tasks
- ``feed.py``     ``TaskFeed``: the live changes of an engine's tasks
- ``views.py``    the operators' JSON of a task, their filters, the listing cursor
- ``static/``     the dashboard's page, script and style
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .feed import TaskFeed
from .service import OPERATOR_CANCELLED_MESSAGE, AdminService

if TYPE_CHECKING:
    from .app import OpsApp
    from .metrics import TaskMetrics

__all__ = ["OPERATOR_CANCELLED_MESSAGE", "AdminService", "OpsApp", "TaskFeed", "TaskMetrics"]


def __getattr__(name: str) -> Any:
    """``OpsApp`` and ``TaskMetrics``, imported on first use (they need ``prometheus_client``)."""
    if name == "OpsApp":
        from .app import OpsApp

        return OpsApp
    if name == "TaskMetrics":
        from .metrics import TaskMetrics

        return TaskMetrics
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
