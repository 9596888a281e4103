"""Corners of the wire the SDK owns, where the README states what happens rather than
changing it: each test drives the corner on loopback, checks the server does what the
README says, and checks the README says it (a statement that goes stale fails here).

- a request whose id is neither a string nor an integer, through the SDK's pipeline
  (``--no-task-endpoint``): taken for a notification, HTTP 202 and no answer (JSON-RPC 2.0
  asks for an answer; the task endpoint gives ``-32600``, tested in test_fair_limits.py);
- a session ``DELETE`` while a ``tasks/result`` of it waits (R-RESULT-2): the stream ends
  without a JSON-RPC answer to it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from testkit.doors import pinned
from testkit.sec_harness import HttpServer, RawHttp, parse_body
from testkit.wait import until

_ROOT = Path(__file__).resolve().parents[2]
#: the README with its security page (docs/security.md), whitespace folded
README = " ".join(
    " ".join((_ROOT / name).read_text() for name in ("README.md", "docs/security.md")).split()
)


@pinned("sdk")  # the task endpoint answers these -32600 (test_fair_limits.py)
@pytest.mark.parametrize("bad_id", ["1.5", "true", "null", "{}"])
def test_sdk_pipeline_takes_ids_that_are_no_ids_for_notifications_as_stated(
    server_factory: Callable[..., HttpServer], bad_id: str
) -> None:
    server = server_factory()
    with RawHttp(server.url) as core:
        body = f'{{"jsonrpc":"2.0","id":{bad_id},"method":"tasks/get","params":{{"taskId":"x"}}}}'
        reply = core.post_raw(body)
        assert (reply.status, reply.messages) == (202, []), reply
        assert core.ok("tools/list", {})["tools"]  # the session goes on
    assert (
        "taken for a notification (HTTP 202, no answer) by the SDK's pipeline"
        " (`--no-task-endpoint`)" in README
    )


def test_session_delete_ends_a_waiting_result_without_an_answer_as_stated(
    server_factory: Callable[..., HttpServer],
) -> None:
    server = server_factory()
    with RawHttp(server.url) as core:
        tid = core.create("slow_compute", {"seconds": 60, "label": "held"})
        request = {"jsonrpc": "2.0", "id": 77, "method": "tasks/result", "params": {"taskId": tid}}
        seen: dict[str, Any] = {}
        streaming = threading.Event()

        def hold() -> None:  # the waiting tasks/result, read to its end
            with core.http.stream(
                "POST", server.url, headers=core._headers(), content=json.dumps(request)
            ) as response:
                streaming.set()  # its head came: the server holds it, waiting on the task
                seen["status"] = response.status_code
                seen["body"] = response.read().decode()
                seen["type"] = response.headers.get("content-type", "")

        holder = threading.Thread(target=hold)
        holder.start()
        until(streaming.is_set, what="the held tasks/result streaming")
        headers = core._headers()
        assert core.http.delete(server.url, headers=headers).status_code in (200, 204)
        core.session_id = None  # ended: close() must not end it again
        holder.join(timeout=60)
        assert not holder.is_alive(), "the held tasks/result stream did not end"
    messages = parse_body(seen["type"], seen["body"])
    assert [m for m in messages if m.get("id") == 77] == [], messages
    assert "a session `DELETE` closes a waiting `tasks/result` stream without an answer" in README
