"""The audit trail (R-SEC-5): one line per security-relevant event.

Events go to the ``<package>.audit`` logger (``mcp_tasks.audit`` for the default package)
at INFO, with ``extra`` fields ``audit_event``, ``requestor`` and ``task_id``. The logger
is quiet unless asked for: it starts at WARNING, so a server whose root logging lets INFO
through does not write a line per ``tasks/get``. To record the trail::

    logging.getLogger("mcp_tasks.audit").setLevel(logging.INFO)

Counters of events (``ops.metrics``) are ``sinks``: each is called with every event, logged
or not (``fn(event, requestor, task_id, fields)``; none by default).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ..logs import logger

audit_log = logger("audit")
if audit_log.level == logging.NOTSET:
    audit_log.setLevel(logging.WARNING)


#: called with every audit event: ``fn(event, requestor, task_id, fields)``
sinks: list[Callable[[str, str, str | None, dict[str, Any]], None]] = []


def audit(event: str, requestor: str, task_id: str | None, **fields: Any) -> None:
    """Record one audit event (a no-op unless the audit logger is at INFO or lower, or a
    sink listens)."""
    for sink in sinks:
        sink(event, requestor, task_id, fields)
    if audit_log.isEnabledFor(logging.INFO):
        audit_log.info(
            "%s requestor=%r task=%s %s",
            event,
            requestor,
            task_id,
            " ".join(f"{k}={v}" for k, v in fields.items()),
            extra={"audit_event": event, "requestor": requestor, "task_id": task_id, **fields},
        )
