"""What an operator needs to run tasks in production: metrics in the Prometheus text format,
health probes, an admin API and a live dashboard, as one ASGI app (``OpsApp``), and the
pieces it is made of (``TaskMetrics``, ``AdminService``, ``TaskFeed``, ``views``).

Install the ``ops`` extra (``prometheus_client``). Every surface is off unless configured;
each needs its own token (see ``app.py``). The ``mcptask admin`` command reads a store
directly, without a server (``cli_admin``).

- ``app.py``      ``OpsApp``: the paths, the tokens, the event stream
- ``metrics.py``  ``TaskMetrics``: what is counted, from which hook
- ``service.py``  ``AdminService``: list, show, count and cancel any requestor's tasks
- ``feed.py``     ``TaskFeed``: the live changes of an engine's tasks
- ``views.py``    the operators' JSON of a task, their filters, the listing cursor
- ``static/``     the dashboard's page, script and style
"""

from __future__ import annotations

from .app import OpsApp
from .feed import TaskFeed
from .metrics import TaskMetrics
from .service import OPERATOR_CANCELLED_MESSAGE, AdminService

__all__ = ["OPERATOR_CANCELLED_MESSAGE", "AdminService", "OpsApp", "TaskFeed", "TaskMetrics"]
