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
    out = mcptask(
        "call", url, "slow_compute", "seconds=0.5", "label=bg", "--detach", "--token", TOKEN
    )
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
    ok = mcptask(
        "call", token_server.url, "slow_compute", "seconds=0", "--detach", "--token", TOKEN
    )
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


PROTOCOLS = ["2025-11-25", "2026-07-28"]


def one_line(out: Any, code: int = 2) -> str:
    """The run's one line on stderr (after any status lines), nothing on stdout."""
    assert out.returncode == code, (out.stdout, out.stderr)
    assert out.stdout == "", out.stdout
    lines = [ln for ln in out.stderr.splitlines() if not ln.startswith("task ")]
    assert len(lines) == 1, out.stderr
    assert "Traceback" not in out.stderr and "pydantic" not in out.stderr
    return lines[0]


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("task", [[], ["--task"]])
def test_an_unknown_tool_is_one_line_naming_the_servers_tools(
    http_server: Any, protocol: str, task: list[str]
) -> None:
    """A tool the server does not list is refused before any call, with or without --task,
    naming the tools there are (R-TOOL-2 is about tools that exist)."""
    out = mcptask("call", http_server.url, "gret", *task, "--protocol", protocol)
    line = one_line(out)
    assert line.startswith("mcptask: no tool 'gret' on this server; its tools: greet, "), line
    assert "slow_compute" in line and "task-augmented" not in line


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_tools_lists_name_task_support_and_summary(http_server: Any, protocol: str) -> None:
    """R-TOOL-2/3/4: each tool's taskSupport as the server declares it, on either face (the
    extension's tools/list does not say: the handshake's is asked)."""
    out = mcptask("tools", http_server.url, "--protocol", protocol)
    assert out.returncode == 0, out.stderr
    rows = {ln.split()[0]: ln.split(None, 2)[1:] for ln in out.stdout.splitlines()}
    assert rows["TOOL"] == ["TASK", "DESCRIPTION"]
    assert rows["greet"] == ["no", "Say hello (never a task)."]
    assert rows["slow_compute"][0] == "optional"
    assert rows["failing_job"][0] == "required"


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("task", [[], ["--task"]])
def test_refused_arguments_are_one_line_naming_the_argument(
    http_server: Any, protocol: str, task: list[str]
) -> None:
    """The SDK's pydantic report (a line per field and a URL) becomes one line: the
    argument, what was expected, what was sent; with and without --task, on either face."""
    pin = ["--protocol", protocol]
    bad = mcptask("call", http_server.url, "slow_compute", "seconds=abc", *task, *pin)
    assert one_line(bad) == (
        "mcptask: slow_compute: argument 'seconds': expected a number, got 'abc'"
    )
    if not task:  # greet never runs as a task
        missing = mcptask("call", http_server.url, "greet", *pin)
        assert one_line(missing) == "mcptask: greet: argument 'name' is missing: pass name=VALUE"


def test_tidy_tool_error_names_every_field() -> None:
    from mcp_tasks.cli_common import tidy_tool_error

    text = (
        "Error executing tool t: 3 validation errors for tArguments\n"
        "n\n  Field required [type=missing, input_value={}, input_type=dict]\n"
        "    For further information visit https://errors.pydantic.dev/2/v/missing\n"
        "flag\n  Input should be a valid boolean [type=bool_parsing, input_value='x',"
        " input_type=str]\n"
        "tags.0\n  Input should be a valid string [type=string_type, input_value=1,"
        " input_type=int]"
    )
    schema = {"properties": {"flag": {"type": "boolean"}, "tags": {"type": "array"}}}
    assert tidy_tool_error("t", text, {"flag": "x", "tags": [1]}, schema) == (
        "t: argument 'n' is missing: pass n=VALUE; argument 'flag': expected true or false,"
        " got 'x'; argument 'tags.0': input should be a valid string, got [1]"
    )
    assert tidy_tool_error("t", "job failed", {}, None) is None
    named = (  # the same refusal as this package's servers say it
        "Error executing tool t: arguments.n: Field required; arguments.flag: Input should be"
        " a valid boolean, unable to interpret input; arguments.zz: Extra inputs are not"
        " permitted"
    )
    assert tidy_tool_error("t", named, {"flag": "x", "zz": 1}, schema) == (
        "t: argument 'n' is missing: pass n=VALUE; argument 'flag': expected true or false,"
        " got 'x'; no argument 'zz' (its arguments: flag, tags)"
    )


def test_a_wrong_path_is_an_http_404(http_server: Any) -> None:
    wrong = http_server.url.rsplit("/", 1)[0] + "/wrong"
    for argv in (["call", wrong, "greet", "name=x"], ["tools", wrong]):
        assert one_line(mcptask(*argv)) == (
            f"mcptask: HTTP 404: no MCP endpoint at {wrong} (is the path /mcp?)"
        )


def test_detach_with_a_token_the_server_does_not_check_is_refused(http_server: Any) -> None:
    """A server without --tokens ignores the token: the 2025-11-25 task would be bound to
    this run's session and cancelled when mcptask exits (R-SEC-1); refused before any task
    is made, saying what to do. The subject-bound case detaches (the tests above)."""
    out = mcptask(
        "call", http_server.url, "slow_compute", "seconds=5", "--detach", "--token", "abc"
    )
    line = one_line(out)
    assert "does not check bearer tokens" in line and "cancelled" in line
    assert "--tokens" in line and "--protocol 2026-07-28" in line and "drop --detach" in line


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("flag", ["--task", "--detach"])
def test_a_forbidden_tool_as_a_task_says_call_it_without_task(
    http_server: Any, protocol: str, flag: str
) -> None:
    """R-TOOL-2: a tool whose taskSupport forbids tasks is refused before the call (on the
    extension too, where it would otherwise run as a plain call), saying what to do."""
    out = mcptask("call", http_server.url, "greet", "name=x", flag, "--protocol", protocol)
    assert one_line(out) == (
        "mcptask: tool 'greet' does not run as a task on this server; call it without --task"
    )


@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
def test_call_as_task_shows_progress_on_both_faces(http_server: Any, protocol: str) -> None:
    """R-PROGRESS-1 on 2025-11-25 (the tool's notifications/progress); on the extension's
    face a task sends none (X-NOTIF-7) and its progress is each new statusMessage."""
    out = mcptask(
        "call", http_server.url, "slow_compute", "seconds=1.5", "label=p", "--task",
        "--protocol", protocol,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "done after 1.5s (p)"
    assert "progress: step " in out.stderr, out.stderr


def test_header_goes_with_every_request(token_server: Any) -> None:
    """``--header`` reaches the server: a bearer token given as a header binds the task to
    its subject (R-SEC-1) as ``--token`` does; a header without a name is one line, exit 2."""
    header = f"Authorization: Bearer {TOKEN}"
    made = mcptask(
        "call", token_server.url, "slow_compute", "seconds=0", "--detach", "--token", TOKEN
    )
    assert made.returncode == 0, made.stderr
    got = mcptask("tasks", "get", token_server.url, made.stdout.strip(), "--header", header)
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout)["taskId"] == made.stdout.strip()
    bad = mcptask("tools", token_server.url, "--header", "no colon")
    assert bad.returncode == 2
    assert bad.stderr.strip() == "mcptask: --header 'no colon': expected 'Name: value'"
