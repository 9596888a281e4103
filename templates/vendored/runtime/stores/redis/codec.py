"""A task as a Redis hash, and back. Field names are short (they are stored per task):

``r`` requestor, ``m`` method, ``s`` status, ``c`` created_at, ``u`` last_updated_at,
``ttl`` ttl ms ('' = unlimited), ``pi`` poll interval ms, ``v`` version, ``k`` lexkey,
``x`` expires_at, ``msg`` status message, ``res`` result JSON, ``err`` error JSON,
``o`` the instance running it (while non-terminal: lease recovery), ``f`` the face that
created it (absent in tasks stored before faces existed: the first face), ``tl`` the tool
of a ``tools/call`` task (absent: none, or stored before tools were kept).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from ....protocol import REVISION, TERMINAL, TaskStatus
from ....store import TaskRecord, encode_json, storable_text


def dumps(value: Any) -> str:
    """JSON as every store encodes it (``store.encode_json``: a lone surrogate escaped, a
    value that is not JSON ``UnstorableValue`` before anything is sent)."""
    out = encode_json(value)
    assert out is not None
    return out


def text(value: Any) -> str:
    """A reply as ``str`` (clients given to the store may not decode responses)."""
    return value.decode() if isinstance(value, bytes) else str(value)


def _num(value: str) -> int | None:
    return None if value == "" else int(value)


def fields(record: TaskRecord, lex: str, owner: str | None) -> list[Any]:
    """``HSET`` arguments (field, value, ...) for a new task."""
    out: list[Any] = [
        "r", record.requestor, "m", record.method, "s", record.status.value,
        "c", repr(record.created_at), "u", repr(record.last_updated_at),
        "ttl", "" if record.ttl_ms is None else str(record.ttl_ms),
        "pi", "" if record.poll_interval_ms is None else str(record.poll_interval_ms),
        "v", str(record.version), "k", lex, "f", record.face,
    ]  # fmt: skip
    if record.expires_at is not None:
        out += ["x", repr(record.expires_at)]
    if record.status_message is not None:
        out += ["msg", storable_text(record.status_message)]
    if record.tool is not None:
        out += ["tl", record.tool]
    if record.result is not None:
        out += ["res", dumps(record.result)]
    if record.error is not None:
        out += ["err", dumps(record.error)]
    if owner is not None:
        out += ["o", owner]
    return out


def as_dict(flat: Iterable[Any] | str | bytes) -> dict[str, str]:
    """An ``HGETALL`` reply (flat field, value list), or a script's ``hash_json`` reply
    (one JSON object, '' for none), as a dict."""
    if isinstance(flat, str | bytes):
        return json.loads(flat) if flat else {}
    items = [text(v) for v in flat]
    return dict(zip(items[::2], items[1::2], strict=True))


def decode(h: dict[str, str], task_id: str) -> TaskRecord | None:
    if not h:
        return None
    res, err = h.get("res"), h.get("err")
    return TaskRecord(
        task_id=task_id,
        requestor=h["r"],
        method=h["m"],
        status=TaskStatus(h["s"]),
        created_at=float(h["c"]),
        last_updated_at=float(h["u"]),
        ttl_ms=_num(h.get("ttl", "")),
        poll_interval_ms=_num(h.get("pi", "")),
        status_message=h.get("msg"),
        result=None if res is None else json.loads(res),
        error=None if err is None else json.loads(err),
        version=int(h.get("v", "0")),
        face=h.get("f", REVISION),
        tool=h.get("tl"),
    )


#: The terminal statuses as the scripts take them (space separated).
TERMINAL_VALUES = " ".join(sorted(s.value for s in TERMINAL))
