"""The ``mcptask`` command, run as a real process against the example server."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from mcp_tasks.cli import coerce_arguments
from testkit.mcp_e2e import interrupt_cli_task
from testkit.ops import mcptask

pytestmark = pytest.mark.door_agnostic  # the CLI: the door is not what is tested (testkit.doors)

SERVER = f"{sys.executable} -m mcp_tasks.examples.server --stdio"
TOKEN = "tok-alice"  # a subject of mcp_e2e.TOKENS


@pytest.fixture(scope="module")
def token_server(tmp_path_factory: pytest.TempPathFactory, front_door: str) -> Any:
    """An example server over Streamable HTTP that binds tasks to bearer-token subjects."""
    from testkit.mcp_e2e import TOKENS, HttpServer

    tmp = tmp_path_factory.mktemp("cli")
    tokens = tmp / "tokens.json"
    tokens.write_text(json.dumps(TOKENS))
    server = HttpServer("--tokens", str(tokens), log_dir=tmp, front_door=front_door)
    try:
        yield server.start()
    finally:
        server.stop()


def test_call_as_task_over_stdio_shows_status_and_progress() -> None:
    out = mcptask("call", SERVER, "slow_compute", "seconds=0.3", "label=cli", "--task")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "done after 0.3s (cli)"
    assert "completed" in out.stderr  # the status line followed the task (R-GET-1)
    # the tool's progress reaches the original progressToken (R-PROGRESS-1), shown on stderr
    assert "progress: step 3/3" in out.stderr


def test_call_errors_over_http(http_server: Any) -> None:
    ok = mcptask("call", http_server.url, "greet", "name=Ada")
    assert ok.returncode == 0 and ok.stdout.strip() == "Hello, Ada!"
    failed = mcptask("call", http_server.url, "failing_job", "--task")
    assert failed.returncode == 1 and failed.stdout.strip() == "job failed"
    # the helper refuses a task call the tool forbids (R-TOOL-2)
    refused = mcptask("call", http_server.url, "greet", "name=x", "--task")
    assert refused.returncode == 2


def test_required_tool_runs_as_a_task_without_the_flag(http_server: Any) -> None:
    # R-TOOL-4: a plain call of a required tool would answer -32601; the CLI makes it a task
    out = mcptask("call", http_server.url, "failing_job")
    assert out.returncode == 1, out.stderr
    assert out.stdout.strip() == "job failed"
    assert "-32601" not in out.stderr and "failed" in out.stderr


def test_string_property_stays_a_string(http_server: Any) -> None:
    out = mcptask("call", http_server.url, "greet", "name=42")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "Hello, 42!"
    # a number property is parsed, an optional string (anyOf string|null) is not
    typed = mcptask("call", http_server.url, "slow_compute", "seconds=0", "label=true")
    assert typed.returncode == 0, typed.stderr
    assert typed.stdout.strip() == "done after 0s (true)"


def test_coerce_arguments_follows_the_input_schema() -> None:
    schema = {
        "type": "object",
        "properties": {
            "text": {"type": "string"},
            "n": {"type": "integer"},
            "x": {"type": "number"},
            "flag": {"type": "boolean"},
            "obj": {"type": "object"},
            "arr": {"type": "array"},
            "maybe": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "either": {"type": ["integer", "null"]},
            "colour": {"enum": ["red", "green"]},
        },
    }
    got = coerce_arguments(
        [
            "text=42",
            "n=3",
            "x=1.5",
            "flag=false",
            'obj={"a": 1}',
            "arr=[1, 2]",
            "maybe=null",
            "either=7",
            "colour=true",
            "free=[1]",
            "loose=hello",
        ],
        schema,
    )
    assert got == {
        "text": "42",
        "n": 3,
        "x": 1.5,
        "flag": False,
        "obj": {"a": 1},
        "arr": [1, 2],
        "maybe": "null",
        "either": 7,
        "colour": "true",
        "free": [1],  # not in the schema: JSON when it parses
        "loose": "hello",
    }
    # not JSON for a typed property: sent as text, the server names the field (-32602)
    assert coerce_arguments(["n=abc"], schema) == {"n": "abc"}
    assert coerce_arguments(["n=1"], None) == {"n": 1}


def test_tasks_subcommands_need_a_lasting_identity(http_server: Any) -> None:
    # each invocation is a new session: the task list of a fresh session is empty (R-SEC-1)
    listed = mcptask("tasks", "list", http_server.url)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == {"tasks": []}
    assert "--token" in listed.stderr  # says why, and what to do
    missing = mcptask("tasks", "get", http_server.url, "nope")
    assert missing.returncode == 1 and "-32602" in missing.stderr
    assert "--token" in missing.stderr


def test_detach_prints_the_task_id_and_the_token_reaches_it(token_server: Any) -> None:
    url = token_server.url
    out = mcptask("call", url, "slow_compute", "seconds=0.5", "label=bg", "--detach", "--token", TOKEN)
    assert out.returncode == 0, out.stderr
    task_id = out.stdout.strip()
    assert task_id and "\n" not in task_id
    result = mcptask("tasks", "result", url, task_id, "--token", TOKEN)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["content"][0]["text"] == "done after 0.5s (bg)"
    got = json.loads(mcptask("tasks", "get", url, task_id, "--token", TOKEN).stdout)
    assert got["status"] == "completed"
    # tasks list omits unset fields exactly like tasks get
    listed = json.loads(mcptask("tasks", "list", url, "--token", TOKEN).stdout)
    row = next(t for t in listed["tasks"] if t["taskId"] == task_id)
    assert row == got
    assert "statusMessage" not in row
    # --detach over stdio would end the server with the run: refused
    stdio = mcptask("call", SERVER, "slow_compute", "--detach")
    assert stdio.returncode == 2 and "HTTP" in stdio.stderr


def test_sigint_cancels_the_task_and_exits_130(token_server: Any, tmp_path: Path) -> None:
    url = token_server.url
    err_path = tmp_path / "stderr.txt"
    argv = [sys.executable, "-m", "mcp_tasks.cli", "call", url, "slow_compute", "seconds=60"]
    task_id = interrupt_cli_task(argv + ["label=sigint", "--task", "--token", TOKEN], err_path)
    assert "cancelled" in err_path.read_text()
    got = json.loads(mcptask("tasks", "get", url, task_id, "--token", TOKEN).stdout)
    assert got["status"] == "cancelled"


def test_unauthorized_is_reported_as_such(token_server: Any) -> None:
    out = mcptask("call", token_server.url, "greet", "name=x")
    assert out.returncode == 1
    assert "unauthorized (HTTP 401): pass --token" in out.stderr
    assert "-32603" not in out.stderr
    wrong = mcptask("tasks", "list", token_server.url, "--token", "nope")
    assert wrong.returncode == 1 and "unauthorized (HTTP 401)" in wrong.stderr


def test_help_is_plain_text() -> None:
    for args in (["--help"], ["call", "--help"], ["tasks", "--help"], ["tasks", "get", "--help"]):
        out = mcptask(*args)
        assert out.returncode == 0, out.stderr
        assert "``" not in out.stdout and ":class:" not in out.stdout
    top = mcptask("--help").stdout
    assert "mcptask call TARGET TOOL" in top and "--token" in top


def test_task_ids_may_start_with_a_dash() -> None:
    from mcp_tasks.cli import _dash_safe

    assert _dash_safe(["tasks", "get", "URL", "-abc", "--token", "t"]) == [
        "tasks",
        "get",
        "--token",
        "t",
        "--",
        "URL",
        "-abc",
    ]
    assert _dash_safe(["tasks", "get", "URL", "abc", "--token=t"]) == [
        "tasks",
        "get",
        "URL",
        "abc",
        "--token=t",
    ]
    out = mcptask("tasks", "get", SERVER, "-no-such-task")
    assert out.returncode == 1 and "-32602" in out.stderr, out.stderr


def test_detach_without_a_token_is_refused_where_the_task_would_die(
    http_server: Any, token_server: Any
) -> None:
    """Without --token the server binds the task to this run's session, which ends (and
    cancels the task, R-SEC-1) when mcptask exits: refused before any call, saying why."""
    out = mcptask("call", http_server.url, "slow_compute", "seconds=5", "--detach")
    assert out.returncode == 2 and out.stdout == "", out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert "--detach without --token" in line and "cancel" in line and "--token TOKEN" in line
    # a subject-bound task outlives the run: detached as before
    ok = mcptask("call", token_server.url, "slow_compute", "seconds=0", "--detach", "--token", TOKEN)
    assert ok.returncode == 0 and ok.stdout.strip(), ok.stderr


def test_detach_prints_no_sdk_noise(token_server: Any) -> None:
    """The tool reports progress at once; the run ends while its stream may still deliver:
    the id, and nothing else."""
    for _ in range(3):
        out = mcptask(
            "call", token_server.url, "slow_compute", "seconds=2", "--detach", "--token", TOKEN
        )
        assert out.returncode == 0 and out.stdout.strip(), out.stderr
        assert out.stderr == "", out.stderr


@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
def test_scripted_answers(http_server: Any, protocol: str) -> None:
    """A script answers the server's questions: --answer key=value, or JSON on stdin (one
    object for every question, or an array in order); empty stdin declines."""
    pin = ["--protocol", protocol]
    call = ["call", http_server.url, "confirm_delete", "path=/tmp/x", "--task", *pin]
    answered = mcptask(*call, "--answer", "confirm=true")
    assert answered.returncode == 0, answered.stderr
    assert answered.stdout.strip() == "deleted /tmp/x"
    piped = mcptask(*call, input='{"confirm": true}')
    assert piped.returncode == 0 and piped.stdout.strip() == "deleted /tmp/x", piped.stderr
    refused = mcptask(*call, "--answer", "confirm=false")  # accepted, but "no"
    assert refused.returncode == 0 and refused.stdout.strip() == "kept /tmp/x", refused.stderr
    declined = mcptask(*call)  # stdin empty (/dev/null)
    assert declined.returncode == 0 and declined.stdout.strip() == "kept /tmp/x"
    both = mcptask(
        "call", http_server.url, "multi_input", "--task", *pin,
        input='[{"name": "Ada", "confirm": true}, {"name": "Bob", "confirm": true}]',
    )  # fmt: skip
    assert both.returncode == 0, both.stderr
    assert sorted(both.stdout.strip().removeprefix("answers: ").split(", ")) == [
        "Ada accept",
        "Bob accept",
    ]


def test_answers_on_stdin_that_are_not_json_are_one_line(http_server: Any) -> None:
    out = mcptask("call", http_server.url, "confirm_delete", "path=/tmp/x", input="green\n")
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().splitlines()[-1] == (
        'mcptask: stdin: expected a JSON object of answers such as {"name": "Ada"}, or an'
        " array of them, or --answer key=value"
    )


@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
def test_an_unknown_tool_is_unknown_also_as_a_task(http_server: Any, protocol: str) -> None:
    """A task-augmented tools/call of a tool the server lacks answers that it is unknown,
    not that it "does not support task-augmented execution" (R-TOOL-2 is about tools that
    exist)."""
    out = mcptask("call", http_server.url, "nosuch", "--task", "--protocol", protocol)
    assert out.returncode != 0
    assert "Unknown tool: nosuch" in out.stdout + out.stderr, out.stderr
    assert "task-augmented" not in out.stderr
