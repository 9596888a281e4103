"""``mcptask admin``, a real process: every requestor's tasks from the store itself (SQLite,
Redis) or through a server's admin API, filtered and paged; one task in full; a cancel
that follows the engine's rules and stops the work where it runs (R-CANCEL-2)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_tasks.errors import RequestCancelled
from mcp_tasks.protocol import CANCELLED, COMPLETED, FAILED, WORKING
from mcp_tasks.runtime import SqliteTaskStore
from mcp_tasks.runtime.ops import OPERATOR_CANCELLED_MESSAGE
from testkit.ops import (
    ALICE,
    BOB,
    OpsServer,
    mcp_session,
    mcptask,
    start_task,
)
from testkit.redis_fixtures import RedisServer, unique_namespace
from testkit.wait import until

# operators' surfaces: the door is not what is tested (testkit.doors)
pytestmark = pytest.mark.door_agnostic


def admin(*args: str) -> Any:
    out = mcptask("admin", *args)
    return out


def listed(*args: str) -> list[dict[str, Any]]:
    out = admin("list", *args, "--json", "--all")
    assert out.returncode == 0, out.stderr
    tasks: list[dict[str, Any]] = json.loads(out.stdout)["tasks"]
    return tasks


def wait_status(server: OpsServer, token: str, task_id: str, status: str) -> None:
    """Wait until the task's owner sees ``status`` (``tasks/get`` on the MCP endpoint)."""
    session = mcp_session(server, token)
    until(
        lambda: session.post("tasks/get", {"taskId": task_id})[1]["result"]["status"],
        satisfied=lambda got: got == status,
        what=f"{task_id} is {status}",
    )


def shown(where: list[str], task_id: str) -> dict[str, Any]:
    """``mcptask admin show --json``: the task as the operator sees it."""
    out = admin("show", *where, task_id, "--json")
    assert out.returncode == 0, out.stderr
    task: dict[str, Any] = json.loads(out.stdout)
    return task


def _fill(server: OpsServer) -> dict[str, str]:
    ids = {
        "alice-slow": start_task(server, ALICE, "slow_compute", "seconds=120"),
        "bob-slow": start_task(server, BOB, "slow_compute", "seconds=120"),
        "bob-fail": start_task(server, BOB, "failing_job"),
        "alice-quick": start_task(server, ALICE, "slow_compute", "seconds=0"),
    }
    return ids


def _lists_and_cancels(server: OpsServer, where: list[str]) -> None:
    """The shared checks of every way in (``where``: ``--store ...`` or ``--url ...``)."""
    ids = _fill(server)
    wait_status(server, BOB, ids["bob-fail"], FAILED.value)
    wait_status(server, ALICE, ids["alice-quick"], COMPLETED.value)
    every = listed(*where)
    assert [t["taskId"] for t in every] == [
        ids["alice-quick"], ids["bob-fail"], ids["bob-slow"], ids["alice-slow"],
    ]  # fmt: skip
    assert {t["requestor"] for t in every} == {"subject:alice", "subject:bob"}
    assert [t["taskId"] for t in listed(*where, "--requestor", "subject:bob")] == [
        ids["bob-fail"],
        ids["bob-slow"],
    ]
    assert [t["taskId"] for t in listed(*where, "--status", WORKING.value)] == [
        ids["bob-slow"],
        ids["alice-slow"],
    ]
    assert [t["taskId"] for t in listed(*where, "--tool", "failing_job")] == [ids["bob-fail"]]
    assert listed(*where, "--older-than", "1h") == []
    assert len(listed(*where, "--newer-than", "1h", "--limit", "1")) == 4  # paged, all pages
    page = admin("list", *where, "--limit", "2")
    assert page.returncode == 0 and "more: --cursor " in page.stderr
    assert ids["alice-quick"] in page.stdout and ids["alice-slow"] not in page.stdout
    cursor = page.stderr.split("--cursor ", 1)[1].split()[0]
    rest = admin("list", *where, "--limit", "2", "--cursor", cursor)
    assert ids["alice-slow"] in rest.stdout and ids["alice-quick"] not in rest.stdout
    detail = admin("show", *where, ids["bob-fail"])
    assert detail.returncode == 0
    assert "status:    failed" in detail.stdout and "Tool error: job failed" in detail.stdout
    # cancel another requestor's running task: its work stops where it runs (R-CANCEL-2)
    cancelled = admin("cancel", *where, "--", ids["bob-slow"])
    assert cancelled.returncode == 0 and "cancelled" in cancelled.stdout, cancelled.stderr
    task = shown(where, ids["bob-slow"])  # in the store once the command returns
    assert task["status"] == CANCELLED.value
    assert task["statusMessage"] == OPERATOR_CANCELLED_MESSAGE
    session = mcp_session(server, BOB)
    _, result = session.post("tasks/result", {"taskId": ids["bob-slow"]})
    assert result["error"]["code"] == RequestCancelled.code  # the requestor learns it
    # a terminal task is not cancelled twice; an unknown one is said to be unknown
    again = admin("cancel", *where, "--", ids["bob-slow"])
    assert again.returncode == 1 and "already cancelled" in again.stderr
    assert admin("cancel", *where, "no-such-task").returncode == 1
    assert admin("show", *where, "no-such-task").returncode == 1
    assert shown(where, ids["alice-slow"])["status"] == WORKING.value


def _work_stopped(server: OpsServer, before: str) -> None:
    """The server's metrics count the running work: the cancelled task's is gone."""
    line = f'mcp_tasks_active{{status="working"}} {before}'
    until(
        server.metrics,
        satisfied=lambda body: line in body,
        what=line,
    )


def test_admin_cli_on_sqlite_with_the_server_running(
    ops_server_factory: Callable[..., OpsServer], tmp_path: Path
) -> None:
    db = tmp_path / "tasks.db"
    server = ops_server_factory(store=f"sqlite:{db}")
    _lists_and_cancels(server, ["--store", f"sqlite:{db}"])
    _work_stopped(server, "1.0")  # only alice-slow still runs: the sweep stopped bob's


def test_admin_cli_on_redis_with_the_server_running(
    ops_server_factory: Callable[..., OpsServer], redis_server: RedisServer
) -> None:
    spec = f"{redis_server.url}?namespace={unique_namespace()}"
    server = ops_server_factory(store=spec)
    _lists_and_cancels(server, ["--store", spec])
    _work_stopped(server, "1.0")


def test_admin_cli_through_the_admin_api(
    ops_server_factory: Callable[..., OpsServer], tmp_path: Path
) -> None:
    """--url reaches the memory store, which lives in the server process; the requestor's
    token is refused there."""
    server = ops_server_factory()
    token = server.admin_token_file
    _lists_and_cancels(server, ["--url", server.ops_url, "--token-file", str(token)])
    forged = tmp_path / "forged.token"
    forged.write_text(ALICE + "\n")
    out = admin("list", "--url", server.ops_url, "--token-file", str(forged))
    assert out.returncode == 2 and "401" in out.stderr
    memory = admin("list", "--store", "memory")
    assert memory.returncode == 2 and "--url" in memory.stderr


def test_admin_cli_without_a_server(
    ops_server_factory: Callable[..., OpsServer], tmp_path: Path
) -> None:
    """With no server running the CLI still lists and cancels: the status changes in the
    store (nothing runs the work), and a server started on the file later keeps it and
    answers the cancellation (its recovery fails only what is still non-terminal)."""
    db = tmp_path / "tasks.db"
    where = ["--store", f"sqlite:{db}"]
    server = ops_server_factory(store=f"sqlite:{db}", ops=False)
    done = start_task(server, ALICE, "slow_compute", "seconds=0")
    left = start_task(server, ALICE, "slow_compute", "seconds=600")
    wait_status(server, ALICE, done, COMPLETED.value)
    server.kill()  # the task it ran stays working in the file
    assert [(t["taskId"], t["status"]) for t in listed(*where)] == [
        (left, WORKING.value),
        (done, COMPLETED.value),
    ]
    out = admin("cancel", *where, "--json", "--", left)
    assert out.returncode == 0 and json.loads(out.stdout)["moved"] is True
    again = admin("cancel", *where, "--json", "--", done)
    assert again.returncode == 1 and json.loads(again.stdout)["moved"] is False
    restarted = ops_server_factory(store=f"sqlite:{db}", ops=False)
    _, result = mcp_session(restarted, ALICE).post("tasks/result", {"taskId": left})
    assert result["error"]["code"] == RequestCancelled.code
    missing = admin("list", "--store", f"sqlite:{tmp_path / 'none.db'}")
    assert missing.returncode == 2 and "no SQLite file" in missing.stderr
    assert not (tmp_path / "none.db").exists()


@pytest.mark.parametrize("bad", [["--status", "nope"], ["--older-than", "soon"], ["--cursor", "x"]])
def test_admin_cli_refuses_bad_filters(tmp_path: Path, bad: list[str]) -> None:
    db = tmp_path / "tasks.db"

    async def make() -> None:
        await SqliteTaskStore(db).close()

    anyio.run(make)
    out = admin("list", "--store", f"sqlite:{db}", *bad)
    assert out.returncode == 2 and "mcptask admin:" in out.stderr
