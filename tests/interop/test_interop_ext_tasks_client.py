"""The official tasks client, ``@modelcontextprotocol/ext-tasks`` 0.2.2 (on
``@modelcontextprotocol/client`` 2.3.1), end to end against our example server.

``ext_tasks_client.mjs`` uses its public API as published (``createTaskSessionFromClient``,
``callTool(..., {task: {preference: "require"}})``, ``execution.settle``, ``cancel`` /
``cancelTask``, ``handoff`` / ``resumeTask``, ``listTasks``, ``createApplicationInputHandler``),
its own polling unchanged, on both wire forms: "v1" (the 2025-11-25 core tasks, after
``initialize``) and "v2" (the 2026-07-28 extension after ``server/discover``, its task
requests on a raw dispatch of the host's over the Client's own transport). One Node run per
form, front door and requestor (with and without a bearer token), and one of v1 over stdio,
records every scenario;
each test checks its part against the spec rules (``docs/spec/tasks-2025-11-25.md`` R-*,
``docs/spec/tasks-extension.md`` X-*). Its ``./receiver`` (the client side of
task-augmented sampling and elicitation) runs against our server-side requestor helper
(``request_client_task``) over stdio.

On v1 this client never calls ``tasks/result`` before a task ends (R-INPUT-3 is a SHOULD):
it polls ``tasks/get`` and waits for the question to come to it. Our server pushes the
question on the client's ``GET`` stream on such a poll (``runtime/serve/input_push.py``), so
the input tasks below finish on v1 too.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from testkit.doors import DEFAULT_DOOR, FRONT_DOORS
from testkit.example_server import ServerPool
from testkit.interop import INTEROP_DIR, SERVER_MODULE, run_node
from testkit.mcp_e2e import TOKENS, write_tokens
from testkit.procs import python_env

pytestmark = pytest.mark.usefixtures("node_modules")

FORMS = ("v1", "v2")
AUTH = ("anonymous", "token")
TOKEN = "tok-alice"
REPO = INTEROP_DIR.parents[1]
Run = Callable[[str, str, str], dict[str, Any]]


@pytest.fixture(scope="module")
def ext_runs(http_server_pool: ServerPool, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """``get(door, auth, form)``: the Node client's record of every scenario against the
    module's server of ``door`` (with ``--tokens`` for ``auth == "token"``; ``stdio``: a
    server process of the client's own), run once."""
    tokens = write_tokens(tmp_path_factory.mktemp("ext-tasks") / "tokens.json", TOKENS)
    cache: dict[tuple[str, str, str], dict[str, Any]] = {}

    def get(door: str, auth: str, form: str) -> dict[str, Any]:
        key = (door, auth, form)
        if key not in cache:
            if door == "stdio":  # a server process per client
                target = ["stdio", sys.executable, "-m", SERVER_MODULE, "--stdio"]
            else:
                args = ("--tokens", str(tokens)) if auth == "token" else ()
                token = [TOKEN] if auth == "token" else []
                target = [http_server_pool.get(door, *args).url, *token]
            out = run_node("ext_tasks_client.mjs", form, *target)
            assert out["_rc"] == 0 and "fatal" not in out, out
            cache[key] = out
        return cache[key]

    return get


#: (front door or stdio, requestor, form): over stdio a v1 client, its questions on the one stream
COMBOS = [(door, auth, form) for door in FRONT_DOORS for auth in AUTH for form in FORMS]
COMBOS.append(("stdio", "anonymous", "v1"))


@pytest.fixture(params=COMBOS, ids=["-".join(c) for c in COMBOS])
def seen(request: pytest.FixtureRequest, ext_runs: Run) -> dict[str, Any]:
    door, auth, form = request.param
    out = ext_runs(door, auth, form)
    out["_auth"] = auth
    return out


def ok(out: dict[str, Any], key: str) -> dict[str, Any]:
    """One scenario's record; a scenario that threw fails the test with its error."""
    part: dict[str, Any] = out[key]
    assert "fatal" not in part, part
    return part


def test_session_of_each_form(seen: dict[str, Any]) -> None:
    caps = seen["capabilities"]
    if seen["form"] == "v1":
        # R-CAP-1, R-CAP-2: our tasks capability read as list, cancel, tools/call
        assert seen["era"] == "legacy"
        assert caps["inventory"] == "server-list" and caps["cancellation"] is True
        assert seen["tools"]["slow_compute"] == "optional"  # R-TOOL-3
        assert seen["tools"]["failing_job"] == "required"  # R-TOOL-4
    else:
        # X-CAP-2: the extension found in server/discover; no tasks/list (X-COMPAT-4)
        assert seen["era"] == "modern"
        assert caps["inventory"] == "known-handles"
        assert caps["cancellation"] is True and caps["inputResponses"] is True
    assert caps["execution"] is True


def test_create_and_follow_exact_result(seen: dict[str, Any]) -> None:
    exact = ok(seen, "exact")
    assert exact["kind"] == "task"  # R-CREATE-2, X-RT-1
    assert exact["statuses"][0] == "working"  # R-STATE-1, X-STATE-3
    assert exact["statuses"][-1] == exact["status"] == "completed"
    assert exact["text"] == "done after 0.2s (x)" and exact["isError"] is False
    if seen["form"] == "v1":  # R-RESULT-4: the related-task _meta on tasks/result
        assert exact["related"] == exact["taskId"]
    # a tool that never runs as a task answers at once through the same call
    assert ok(seen, "immediate") == {
        "kind": "immediate",
        "status": "completed",
        "text": "Hello, Ada!",
    }


def test_tool_error(seen: dict[str, Any]) -> None:
    job = ok(seen, "toolError")
    if seen["form"] == "v1":
        # R-STATE-4: an isError result ends failed, with a diagnostic statusMessage that
        # this client reports as the failure (it reads no tasks/result of a failed task)
        assert job["status"] == "failed"
        assert job["error"]["message"] == "Tool error: job failed"
    else:
        # X-ERR-4, X-GET-9: completed, the isError result inlined
        assert job["status"] == "completed"
        assert job["isError"] is True and job["text"] == "job failed"


def test_protocol_error(seen: dict[str, Any]) -> None:
    job = ok(seen, "protocolError")
    assert job["status"] == "failed"  # R-ERR-3, X-ERR-3
    assert job["error"]["message"] == "Internal error: protocol_error_job crashed"
    if seen["form"] == "v2":  # X-GET-9: the JSON-RPC error itself, code included
        assert job["error"]["code"] == -32603


def test_cancel(seen: dict[str, Any]) -> None:
    cancel = ok(seen, "cancel")
    # R-CANCEL-2, R-CANCEL-3 / X-CAN-3: cancelled, and it stays so
    assert cancel["status"] == "cancelled" and cancel["after"] == "cancelled"
    if seen["form"] == "v1":  # R-CANCEL-1: cancelling a terminal task -> -32602
        assert cancel["again"]["code"] == -32602
        assert "terminal" in cancel["again"]["message"]
    else:  # X-CAN-3: acknowledged
        assert cancel["again"] is None
    # cancelTask by identity, of an execution no longer driven here
    assert ok(seen, "cancelById")["after"] == "cancelled"


@pytest.mark.parametrize(("scenario", "path", "text"), [
    ("accept", "/tmp/accept", "deleted /tmp/accept"),
    ("decline", "/tmp/decline", "kept /tmp/decline"),
])  # fmt: skip
def test_input(seen: dict[str, Any], scenario: str, path: str, text: str) -> None:
    run = ok(seen, scenario)
    # R-INPUT-1, R-INPUT-4 / X-UPD-1: input_required while it waits, then completed
    assert "input_required" in run["statuses"]
    assert run["status"] == "completed" and run["text"] == text
    # asked once, as a question of this very task
    assert [a["message"] for a in run["asked"]] == [f"Delete {path}?"]
    asked = run["asked"][0]
    assert asked["scope"] == "task" and asked["taskId"] == run["taskId"]
    if seen["form"] == "v1":
        # R-INPUT-2: a server request carrying the task's related-task _meta (the client
        # matched it to the task by it), pushed while the client polled (R-INPUT-3)
        assert asked["delivery"] == "peer-request"
    else:  # X-UPD-1, X-UPD-2: inputRequests of tasks/get, answered by tasks/update
        assert asked["delivery"] == "task-update"


def test_several_questions(seen: dict[str, Any]) -> None:
    run = ok(seen, "multi")
    assert run["status"] == "completed"
    assert run["text"] == "answers: Ada accept, Ada accept"
    # two questions outstanding together, each asked once (X-UPD-5: keys unique)
    assert sorted(a["message"] for a in run["asked"]) == [
        "First: your name, and go ahead?",
        "Second: your name, and go ahead?",
    ]


def test_question_before_the_task(seen: dict[str, Any]) -> None:
    """``test_tool_with_task`` asks the user's name first thing: on v2 in an input round of
    the ``tools/call`` itself, before any task exists (X-MRTR-1); on v1 as the task starts,
    before the client may even hold its ``CreateTaskResult``: it is pushed only once the
    client polls the task, so the client can tell whose question it is."""
    run = ok(seen, "beforeTask")
    assert run["status"] == "completed" and run["text"] == "Hello, Ada!"
    names = [a for a in seen["asked"] if a["message"] == "Your name?"]
    assert len(names) == 1
    if seen["form"] == "v1":
        assert names[0]["scope"] == "task" and names[0]["taskId"] == run["taskId"]
        assert "input_required" in run["statuses"]  # R-INPUT-1
    else:
        assert names[0]["scope"] == "request" and names[0]["delivery"] == "request-retry"
        assert "input_required" not in run["statuses"]


def test_list(seen: dict[str, Any]) -> None:
    if seen["form"] == "v2":  # X-COMPAT-4: no tasks/list; the client says so itself
        assert "not supported" in seen["list"]["fatal"]["message"]
        return
    listed = {t["taskId"]: t["status"] for t in ok(seen, "list")["tasks"]}
    # R-LIST-3: every task of this requestor, with its status now
    for key in ("exact", "toolError", "protocolError", "accept", "decline", "multi", "beforeTask"):
        run = seen[key]
        assert listed[run["taskId"]] == run["status"], key
    assert listed[seen["cancel"]["taskId"]] == "cancelled"


def test_resume_on_a_fresh_client(seen: dict[str, Any]) -> None:
    """A task handed off by one client (its serialized reference) and resumed by a new
    client on a new session."""
    resume = ok(seen, "resume")
    assert resume["reference"]["generation"] == seen["form"]
    if seen["form"] == "v1" and seen["_auth"] == "anonymous":
        # R-SEC-1: without a token the requestor is the HTTP session (or the stdio
        # connection), so another session cannot reach the task (and the first session's
        # end cancelled it)
        assert resume["error"]["code"] == -32602
        return
    # a bearer token's subject (or, on v2 without one, the client's address) is one
    # requestor across sessions: the fresh client follows the task to its exact result
    assert resume["status"] == "completed" and resume["text"] == "done after 1s (resumed)"


def test_unknown_ids(seen: dict[str, Any]) -> None:
    unknown = ok(seen, "unknown")
    # R-ERR-1 / X-CAN-4, X-GET-4: an unknown taskId -> -32602, on get, cancel and resume
    for what in ("snapshot", "cancel", "resume"):
        assert unknown[what]["code"] == -32602, what
        assert unknown[what]["message"] == "Failed to retrieve task: Task not found"  # R-ERR-2


def test_receiver_against_our_requestor(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its ``./receiver`` on the client: our server (``testkit.client_task_server``, through
    ``request_client_task``) sends ``sampling/createMessage`` and ``elicitation/create`` as
    tasks (R-CAP-3: the receiver declared ``tasks.requests`` for both), follows them with
    ``tasks/get`` and takes ``tasks/result`` (R-RESULT-1), then lists them (R-LIST-3)."""
    monkeypatch.setenv("PYTHONPATH", python_env()["PYTHONPATH"])  # the child finds testkit
    server = [sys.executable, "-m", "testkit.client_task_server"]
    out = run_node("ext_tasks_client.mjs", "receiver", *server)
    assert out["_rc"] == 0 and "fatal" not in out, out
    assert out["declared"] == {
        "list": {},
        "cancel": {},
        "requests": {"sampling": {"createMessage": {}}, "elicitation": {"create": {}}},
    }
    sampling, elicitation = out["sampling"], out["elicitation"]
    assert sampling["as_task"] is True and elicitation["as_task"] is True
    assert sampling["result"]["content"] == {"type": "text", "text": "hi from ext-tasks"}
    assert sampling["result"]["model"] == "interop"
    assert elicitation["result"] == {"action": "accept", "content": {"name": "Ada"}}
    received = {r["method"]: r["taskId"] for r in out["received"]}
    listed = {t["taskId"]: t["status"] for t in elicitation["listed"]["tasks"]}
    assert listed == {
        received["sampling/createMessage"]: "completed",
        received["elicitation/create"]: "completed",
    }


def test_the_host_of_the_docs(http_server_pool: ServerPool, tmp_path: Path) -> None:
    """The TypeScript host of ``docs/clients.md`` runs as written against the example
    server: its ``confirm_delete`` task is asked its question while the client polls, and
    ends with the exact result (R-INPUT-2, R-INPUT-3, R-RESULT-1)."""
    doc = (REPO / "docs" / "clients.md").read_text()
    block = doc.split("```js\n", 1)[1].split("```", 1)[0]
    (tmp_path / "host.mjs").write_text(block)
    (tmp_path / "node_modules").symlink_to(INTEROP_DIR / "node_modules")
    server = http_server_pool.get(DEFAULT_DOOR)
    out = run_node("host.mjs", server.url, cwd=tmp_path)
    assert out["_rc"] == 0, out
    assert out["content"] == [{"type": "text", "text": "deleted /tmp/x"}]
    assert out["isError"] is False
