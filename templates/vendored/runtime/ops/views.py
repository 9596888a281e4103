"""What operators see of a task, in one JSON shape for the admin API, the dashboard and
``mcptask admin --json``; the filters they give (status, requestor, tool, age) as a
``TaskQuery``; and the opaque cursor of a listing page.

The shape (camelCase, like the wire's): ``taskId``, ``status``, ``statusMessage``,
``requestor``, ``tool``, ``face``, ``method``, ``createdAt``, ``lastUpdatedAt``,
``expiresAt`` (RFC 3339, or None), ``ttlMs``, ``pollIntervalMs``, ``version``, and the
timings ``ageS`` (since creation) and ``durationS`` (creation to the end, terminal tasks
only); a task's detail adds ``result``, ``error`` and ``inputRequests`` (each outstanding
request: ``key``, ``method``, ``params``).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ...protocol import STATUSES, TERMINAL, TaskStatus
from ...store import TaskQuery, TaskRecord, rfc3339
from ..engine.runs import InputRequest

__all__ = [
    "QueryError",
    "decode_cursor",
    "encode_cursor",
    "inputs_json",
    "parse_age",
    "parse_statuses",
    "query_of",
    "task_view",
]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
#: longest ``requestor``/``tool`` filter accepted (longer cannot match a sane value)
MAX_FILTER = 512


class QueryError(ValueError):
    """A filter or cursor an operator gave that cannot be used (the message says why)."""


def task_view(rec: TaskRecord, now: float, *, detail: bool = False) -> dict[str, Any]:
    """The operators' JSON of a task (see the module's docstring)."""
    expires = rec.expires_at
    out: dict[str, Any] = {
        "taskId": rec.task_id,
        "status": rec.status.value,
        "statusMessage": rec.status_message,
        "requestor": rec.requestor,
        "tool": rec.tool,
        "face": rec.face,
        "method": rec.method,
        "createdAt": rfc3339(rec.created_at),
        "lastUpdatedAt": rfc3339(rec.last_updated_at),
        "expiresAt": None if expires is None else rfc3339(expires),
        "ttlMs": rec.ttl_ms,
        "pollIntervalMs": rec.poll_interval_ms,
        "version": rec.version,
        "ageS": round(max(0.0, now - rec.created_at), 3),
        "durationS": (
            round(max(0.0, rec.last_updated_at - rec.created_at), 3)
            if rec.status in TERMINAL
            else None
        ),
    }
    if detail:
        out["result"] = rec.result
        out["error"] = rec.error
    return out


def inputs_json(inputs: Iterable[InputRequest]) -> list[dict[str, Any]]:
    """A task's outstanding input requests in the operators' JSON, oldest first."""
    return [{"key": i.key, "method": i.method, "params": i.params} for i in inputs]


def parse_statuses(values: Iterable[str]) -> frozenset[TaskStatus] | None:
    """Statuses named by value (comma-separated items allowed); None when none is named."""
    names = [v.strip() for value in values for v in value.split(",") if v.strip()]
    if not names:
        return None
    known = {s.value: s for s in STATUSES}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise QueryError(f"unknown status {unknown[0]!r} (one of: {', '.join(sorted(known))})")
    return frozenset(known[n] for n in names)


def parse_age(text: str) -> float:
    """An age such as ``90``, ``90s``, ``15m``, ``2h``, ``3d``, in seconds."""
    m = _AGE.match(text)
    if m is None:
        raise QueryError(f"age {text!r}: a number with s, m, h or d (e.g. 15m)")
    seconds = float(m.group(1)) * _UNITS[m.group(2) or "s"]
    if not math.isfinite(seconds):
        raise QueryError(f"age {text!r}: too large")
    return seconds


def query_of(
    now: float,
    *,
    statuses: Sequence[str] = (),
    requestor: str | None = None,
    tool: str | None = None,
    newer_than: str | None = None,
    older_than: str | None = None,
) -> TaskQuery:
    """The ``TaskQuery`` of an operator's filters: ``newer_than``/``older_than`` are ages
    (``parse_age``) counted back from ``now``; empty strings mean no filter."""
    for name, value in (("requestor", requestor), ("tool", tool)):
        if value is not None and len(value) > MAX_FILTER:
            raise QueryError(f"{name}: at most {MAX_FILTER} characters")
    return TaskQuery(
        statuses=parse_statuses(statuses),
        requestor=requestor or None,
        tool=tool or None,
        created_after=now - parse_age(newer_than) if newer_than else None,
        created_before=now - parse_age(older_than) if older_than else None,
    )


def query_json(query: TaskQuery) -> dict[str, Any]:
    """A query as JSON (what a listing answers with, for the reader to check)."""
    return {
        "statuses": None if query.statuses is None else sorted(s.value for s in query.statuses),
        "requestor": query.requestor,
        "tool": query.tool,
        "createdAfter": None if query.created_after is None else rfc3339(query.created_after),
        "createdBefore": None if query.created_before is None else rfc3339(query.created_before),
    }


def encode_cursor(key: tuple[float, str] | None) -> str | None:
    """A page's ``next`` key as an opaque cursor (None: the last page)."""
    if key is None:
        return None
    raw = json.dumps([key[0], key[1]], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> tuple[float, str] | None:
    """The key of a cursor ``encode_cursor`` made; ``QueryError`` for anything else."""
    if not cursor:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        value = json.loads(raw)
    except (binascii.Error, ValueError):
        raise QueryError("cursor: not a cursor of this listing") from None
    if (
        not isinstance(value, list)
        or len(value) != 2
        or not isinstance(value[0], int | float)
        or isinstance(value[0], bool)
        or not isinstance(value[1], str)
        or not math.isfinite(value[0])
    ):
        raise QueryError("cursor: not a cursor of this listing")
    return float(value[0]), value[1]


def first(params: Mapping[str, list[str]], name: str) -> str | None:
    """The first value of a query-string parameter (None when absent)."""
    values = params.get(name)
    return values[0] if values else None
