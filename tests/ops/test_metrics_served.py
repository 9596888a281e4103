"""``/metrics`` of the example server as a real process, scraped over HTTP as Prometheus (or
``curl``) does, while a real client's tasks run through either front door: every series of
the README's table is there, counting what happened."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from prometheus_client.parser import text_string_to_metric_families

from mcp_tasks.protocol import COMPLETED, FAILED, INPUT_REQUIRED, REVISION
from testkit.doors import ENDPOINT
from testkit.ops import ALICE, BOB, METRICS_TOKEN, McpHttp, OpsServer, http, mcp_session, start_task
from testkit.redis_fixtures import RedisServer, unique_namespace
from testkit.wait import until

# operators' surfaces: the door is not what is tested (testkit.doors)
pytestmark = pytest.mark.door_agnostic

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
#: every family the README's table names (a counter's samples end in ``_total``)
FAMILIES = {
    "mcp_tasks_created", "mcp_tasks_ended", "mcp_tasks_active", "mcp_tasks_duration_seconds",
    "mcp_tasks_input_required_seconds", "mcp_tasks_expired", "mcp_tasks_refused",
    "mcp_tasks_store_errors", "mcp_tasks_store_retries", "mcp_tasks_notifications_dropped",
    "mcp_tasks_task_endpoint_requests",
}  # fmt: skip


def scrape(server: OpsServer) -> tuple[set[str], Samples]:
    status, headers, body = http(server.ops_url + "/metrics", token=METRICS_TOKEN)
    assert status == 200
    ctype = {k.lower(): v for k, v in headers.items()}["content-type"]
    assert ctype.startswith("text/plain")  # the text format
    families = list(text_string_to_metric_families(body.decode()))
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value for f in families for s in f.samples
    }
    return {f.name for f in families}, samples


def status_of(session: McpHttp, task_id: str) -> str:
    _, got = session.post("tasks/get", {"taskId": task_id})
    status: str = got["result"]["status"]
    return status


def test_every_series_counts_a_real_servers_tasks_R_SEC_4(
    ops_server_factory: Callable[..., OpsServer],
) -> None:
    server = ops_server_factory(extra=("--max-active", "2"))
    alice, bob = mcp_session(server, ALICE), mcp_session(server, BOB)
    done = start_task(server, ALICE, "slow_compute", "seconds=0")
    failed = start_task(server, BOB, "failing_job")
    asking = start_task(server, ALICE, "confirm_delete", "path=/srv/old.csv")
    until(lambda: status_of(alice, done) == COMPLETED.value, what="slow_compute(0) completes")
    until(lambda: status_of(bob, failed) == FAILED.value, what="failing_job fails")
    until(lambda: status_of(alice, asking) == INPUT_REQUIRED.value, what="the question is asked")
    start_task(server, ALICE, "slow_compute", "seconds=600")  # alice's second active task
    _, refused = alice.post(
        "tools/call", {"name": "slow_compute", "arguments": {"seconds": 1}, "task": {}}
    )
    assert "error" in refused, refused  # a third: over --max-active (R-SEC-4)

    families, got = scrape(server)
    assert FAMILIES <= families, FAMILIES - families

    def value(name: str, **labels: str) -> float:
        return got.get((name, tuple(sorted(labels.items()))), 0.0)

    created = "mcp_tasks_created_total"
    assert value(created, face=REVISION, tool="slow_compute") == 2
    assert value(created, face=REVISION, tool="failing_job") == 1
    assert value(created, face=REVISION, tool="confirm_delete") == 1
    ended = "mcp_tasks_ended_total"
    assert value(ended, face=REVISION, tool="slow_compute", status=COMPLETED.value) == 1
    assert value(ended, face=REVISION, tool="failing_job", status=FAILED.value) == 1
    duration = "mcp_tasks_duration_seconds_count"
    assert value(duration, face=REVISION, tool="failing_job", status=FAILED.value) == 1
    assert value("mcp_tasks_active", status=INPUT_REQUIRED.value) == 1
    assert value("mcp_tasks_active", status="working") == 1
    assert value("mcp_tasks_refused_total", limit="active") == 1
    assert value("mcp_tasks_store_errors_total") == 0
    assert value("mcp_tasks_notifications_dropped_total") == 0
    replied = value("mcp_tasks_task_endpoint_requests_total", outcome="replied")
    if server.front_door == ENDPOINT:
        assert replied >= 4  # the tasks/get calls above were answered there
    else:
        assert replied == 0  # --no-task-endpoint: every request took the SDK's pipeline


def test_readiness_follows_the_store(
    ops_server_factory: Callable[..., OpsServer], fresh_redis_server: RedisServer
) -> None:
    """``/readyz`` answers 503 naming the store while Redis is down, and 200 again once it is
    back; ``/healthz`` stays 200 meanwhile (the process is alive: no restart is asked for)."""
    spec = f"{fresh_redis_server.url}?namespace={unique_namespace()}"
    server = ops_server_factory(store=spec, metrics=False, admin=False)
    ready, live = server.ops_url + "/readyz", server.ops_url + "/healthz"
    assert http(ready)[0] == 200
    fresh_redis_server.stop()
    status, _, body = until(lambda: http(ready), satisfied=lambda r: r[0] == 503, what="503")
    assert json.loads(body)["status"] == "unavailable" and json.loads(body)["store"]
    assert http(live)[0] == 200
    fresh_redis_server.start()
    until(lambda: http(ready)[0] == 200, what="ready again")
