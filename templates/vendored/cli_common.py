"""What both faces of ``mcptask`` share: ``key=value`` arguments coerced by the tool's input
schema, the status line on stderr, the terminal's answers to elicitation, printing results,
and running a call that Ctrl-C interrupts."""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import secrets
import select
import shlex
import signal
import sys
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

import anyio

__all__ = [
    "OneLineParser",
    "Progress",
    "Usage",
    "StatusLine",
    "coerce_arguments",
    "Answers",
    "dump",
    "headers_of",
    "interruptible",
    "print_json",
    "print_result",
    "quiet_on_closed_stdout",
    "suggest",
    "tidy_tool_error",
]


class Usage(Exception):
    """A mistake in the command line: exit 2."""


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose mistakes are one line on stderr (what is wrong, and where
    the usage is), exit 2, rather than the usage block before the message."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def headers_of(token: str | None, given: list[str] | None) -> dict[str, str] | None:
    """The HTTP headers of a run: ``--header 'Name: value'`` (each), then the bearer
    ``--token``; None when there are none. ``Usage`` for a header without a name."""
    headers: dict[str, str] = {}
    for header in given or ():
        name, sep, value = header.partition(":")
        if not sep or not name.strip() or any(c.isspace() for c in name.strip()):
            raise Usage(f"--header {header!r}: expected 'Name: value'")
        headers[name.strip()] = value.strip()
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers or None


def suggest(args: argparse.Namespace, *words: str) -> str:
    """The command ``mcptask WORDS...`` to run next, with the options of this run that reach
    the same server and tasks (``--token``, each ``--header``, a pinned ``--protocol``),
    quoted for a shell: a suggestion that drops them would fail where this run did not."""
    argv = ["mcptask", *words]
    if getattr(args, "token", None):
        argv += ["--token", args.token]
    for header in getattr(args, "header", None) or ():
        argv += ["--header", header]
    if getattr(args, "protocol", "auto") != "auto":
        argv += ["--protocol", args.protocol]
    return shlex.join(argv)


def _parse_json_or_text(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _schema_types(spec: Any) -> set[str]:
    """The JSON types a property schema admits (``type``, ``anyOf``/``oneOf``, ``const``)."""
    if not isinstance(spec, Mapping):
        return set()
    out: set[str] = set()
    kind = spec.get("type")
    if isinstance(kind, str):
        out.add(kind)
    elif isinstance(kind, list):
        out.update(k for k in kind if isinstance(k, str))
    for key in ("anyOf", "oneOf", "allOf"):
        for sub in spec.get(key) or ():
            out |= _schema_types(sub)
    for value in [spec["const"]] if "const" in spec else list(spec.get("enum") or ()):
        out.add("string" if isinstance(value, str) else "json")
    return out


def _coerce(raw: str, spec: Any) -> Any:
    """A string property keeps the text; any other (or an untyped one) takes it as JSON when it
    parses, else as text, which the server then refuses naming the field."""
    if "string" in _schema_types(spec):
        return raw
    return _parse_json_or_text(raw)


def coerce_arguments(pairs: list[str], input_schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """``key=value`` pairs as tool arguments, typed by the tool's ``inputSchema``."""
    props = (input_schema or {}).get("properties")
    props = props if isinstance(props, Mapping) else {}
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise Usage(f"expected key=value, got {pair!r}")
        out[key] = _coerce(value, props.get(key))
    return out


@dataclass
class StatusLine:
    """One line on stderr, rewritten as the task's status and progress change."""

    tty: bool = field(default_factory=lambda: sys.stderr.isatty())
    last: str = ""
    head: str = ""
    progress: str = ""

    def show(self, task: Any) -> None:
        message = f" - {_status_text(task.statusMessage)}" if task.statusMessage else ""
        status = getattr(task.status, "value", task.status)
        self.head = f"task {task.taskId}: {status}{message}"
        self._write()

    def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        share = f" ({progress / total:.0%})" if total else ""
        text = message or (f"{progress:g}/{total:g}" if total else f"{progress:g}")
        self.progress = f"progress: {text}{share}"
        self._write()

    async def report(self, progress: float, total: float | None, message: str | None) -> None:
        """:meth:`on_progress` as a requestor's ``on_progress`` callback (async)."""
        self.on_progress(progress, total, message)

    def _write(self) -> None:
        line = " | ".join(part for part in (self.head, self.progress) if part)
        if not line or line == self.last:
            return
        self.last = line
        if self.tty:
            sys.stderr.write("\r\x1b[2K" + line)
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def done(self) -> None:
        if self.tty and self.last:
            sys.stderr.write("\n")
            sys.stderr.flush()


async def _ask(prompt: str) -> str:
    def read() -> str:
        sys.stderr.write(prompt)
        sys.stderr.flush()
        return sys.stdin.readline().strip()

    return await anyio.to_thread.run_sync(read)


def _properties(schema: Any) -> Mapping[str, Any]:
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    return props if isinstance(props, Mapping) else {}


@dataclass
class Answers:
    """How ``mcptask`` answers a server's questions (elicitation, a task's input requests).

    ``--answer key=value`` (any number): every question is accepted with those fields, typed
    by the question's schema as ``key=value`` arguments are. Else, with stdin not a
    terminal: stdin is read once, a JSON object (the fields, for every question) or an
    array of them (one per question, in the order asked); empty stdin declines. Else the
    terminal asks."""

    pairs: list[str] = field(default_factory=list)
    #: a mistake in the scripted answers, found when the first question came (exit 2)
    error: Usage | None = None
    _scripted: list[dict[str, Any]] | None = None
    _asked: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        coerce_arguments(self.pairs, None)  # Usage for a pair that is not key=value

    def _read_stdin(self) -> list[dict[str, Any]] | None:
        """The answers on stdin (read once, when the first question comes: a run that asks
        nothing never waits for stdin); None when stdin is a terminal."""
        if self._scripted is not None:
            return self._scripted
        if sys.stdin is None or sys.stdin.isatty():
            return None
        text = sys.stdin.read().strip()
        hint = 'a JSON object of answers such as {"name": "Ada"}, or an array of them'
        try:
            data = json.loads(text) if text else []
        except ValueError:
            raise Usage(f"stdin: expected {hint}, or --answer key=value") from None
        items = data if isinstance(data, list) else [data]
        if not all(isinstance(item, dict) for item in items):
            raise Usage(f"stdin: expected {hint}")
        self._scripted = items
        return items

    def content(self, schema: Any) -> dict[str, Any] | None:
        """The scripted answer to the next question (None: decline); :class:`_Interactive`
        when there is none (the terminal asks)."""
        if self.pairs:
            return coerce_arguments(self.pairs, schema)
        with self._lock:  # two questions may come at once
            scripted = self._read_stdin()
            if scripted is None:
                raise _Interactive
            if not scripted:
                return None
            index = min(self._asked, len(scripted) - 1)
            self._asked += 1
            return dict(scripted[index])

    async def elicit(self, ctx: Any, params: Any) -> Any:
        """The session's ``elicitation_callback``."""
        import mcp_types as types

        sys.stderr.write(f"\nserver asks: {params.message}\n")
        schema = getattr(params, "requested_schema", None) or {}
        try:
            content = await anyio.to_thread.run_sync(self.content, schema)
        except _Interactive:
            return await _ask_terminal(schema)
        except Usage as exc:
            self.error = exc
            return types.ElicitResult(action="cancel")
        if content is None:
            sys.stderr.write("answer: decline (no answers on stdin)\n")
            return types.ElicitResult(action="decline")
        sys.stderr.write(f"answer: {json.dumps(content, sort_keys=True)}\n")
        return types.ElicitResult(action="accept", content=content)


class _Interactive(Exception):
    """No scripted answers: ask on the terminal."""


async def _ask_terminal(schema: Any) -> Any:
    import mcp_types as types

    answer = (await _ask("accept? [y/N] ")).lower()
    if answer not in ("y", "yes"):
        return types.ElicitResult(action="decline")
    content: dict[str, Any] = {}
    for name, spec in _properties(schema).items():
        kind = spec.get("type", "string") if isinstance(spec, dict) else "string"
        raw = await _ask(f"{name} ({kind}): ")
        if kind == "boolean":
            content[name] = raw.lower() in ("", "y", "yes", "true", "1")
        elif kind in ("number", "integer"):
            content[name] = _parse_json_or_text(raw or "0")
        else:
            content[name] = raw
    return types.ElicitResult(action="accept", content=content)


@dataclass
class Progress:
    """Routes ``notifications/progress`` of our token to the status line."""

    token: str = field(default_factory=lambda: f"mcptask-{secrets.token_hex(8)}")
    line: StatusLine | None = None

    async def on_message(self, message: Any) -> None:
        import mcp_types as types

        if not isinstance(message, types.ProgressNotification) or self.line is None:
            return
        p = message.params
        if p.progress_token == self.token:
            self.line.on_progress(p.progress, p.total, p.message)


_VALIDATION = re.compile(r"^Error executing tool (?P<tool>\S+): \d+ validation errors? for \S+$")
#: the same refusal as this package's servers say it: ``arguments.NAME: REASON; ...``
_NAMED = re.compile(r"^Error executing tool (?P<tool>\S+): (?P<fields>arguments\..*)$")
#: the kind of a refused argument, by pydantic's message of it
_KINDS = {
    "Field required": "missing",
    "Unexpected keyword argument": "unexpected_keyword_argument",
    "Extra inputs are not permitted": "extra_forbidden",
}
_EXPECTED = {
    "number": "a number",
    "integer": "an integer",
    "boolean": "true or false",
    "string": "a string",
    "object": "a JSON object",
    "array": "a JSON array",
}


def _status_text(message: str) -> str:
    """A task's statusMessage on the status line: one line (the tool's arguments refused is
    said below it, once)."""
    text = message.removeprefix("Tool error: ")
    if _refused(text) is not None:
        return "Tool error: invalid arguments"
    first, _, rest = message.partition("\n")
    return first + (" ..." if rest.strip() else "")


def _shown(value: Any) -> str:
    return repr(value) if isinstance(value, str) else json.dumps(value)


def _refused(text: str) -> list[tuple[str, str, str]] | None:
    """(argument, kind, message) of each argument a tool refused, from the one line this
    package's servers say it in or from the SDK's pydantic report (a line per field, its
    message and type, a URL); None for any other text."""
    lines = text.splitlines()
    named = _NAMED.match(text) if len(lines) == 1 else None
    if named is not None:
        out = []
        for field in named["fields"].removeprefix("arguments.").split("; arguments."):
            name, _, reason = field.partition(": ")
            out.append((name, _KINDS.get(reason, ""), reason))
        return out
    if not lines or not _VALIDATION.match(lines[0]):
        return None
    found: list[tuple[str, str, str]] = []
    loc: str | None = None
    for line in lines[1:]:
        if line and not line.startswith(" "):
            loc = line.strip()
            continue
        if loc is None or not line.startswith("  ") or line.startswith("   "):
            continue
        message, _, rest = line.strip().partition(" [type=")
        found.append((loc, re.split(r"[,\]]", rest, maxsplit=1)[0], message))
        loc = None
    return found


def tidy_tool_error(
    tool: str, text: str, arguments: Mapping[str, Any], schema: Mapping[str, Any] | None
) -> str | None:
    """A tool's error for arguments its input model refused (:func:`_refused`) as one line
    naming each argument, what was expected and what was sent; None for any other text."""
    refused = _refused(text)
    if refused is None:
        return None
    props = _properties(schema)
    problems: list[str] = []
    for loc, kind, message in refused:
        name = loc.split(".", 1)[0]
        if kind == "missing":
            problems.append(f"argument {loc!r} is missing: pass {name}=VALUE")
        elif kind in ("unexpected_keyword_argument", "extra_forbidden"):
            known = ", ".join(props) or "none"
            problems.append(f"no argument {loc!r} (its arguments: {known})")
        else:
            types = sorted(_schema_types(props.get(name)) - {"null", "json"})
            wanted = " or ".join(_EXPECTED.get(t, t) for t in types) if loc == name else ""
            what = f"expected {wanted}" if wanted else message[:1].lower() + message[1:]
            got = f", got {_shown(arguments[name])}" if name in arguments else ""
            problems.append(f"argument {loc!r}: {what}{got}")
    return f"{tool}: " + "; ".join(problems) if problems else None


def print_result(
    result: Any,
    tool: str | None = None,
    arguments: Mapping[str, Any] | None = None,
    schema: Mapping[str, Any] | None = None,
) -> int:
    """The result's content on stdout; exit 1 for a tool error. Arguments the tool refused
    (``tool`` given) are one line on stderr instead, exit 2."""
    texts = [getattr(block, "text", None) for block in result.content]
    if result.is_error and tool is not None and len(texts) == 1 and texts[0] is not None:
        line = tidy_tool_error(tool, texts[0], arguments or {}, schema)
        if line is not None:
            print(f"mcptask: {line}", file=sys.stderr)
            return 2
    for block in result.content:
        text = getattr(block, "text", None)
        print(text if text is not None else block.model_dump_json(by_alias=True))
    return 1 if result.is_error else 0


def dump(data: Any) -> Any:
    """A model as the wire shows it: fields the server did not send stay absent."""
    if hasattr(data, "model_dump"):
        return data.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return data


def print_json(data: Any) -> None:
    print(json.dumps(dump(data), indent=2, sort_keys=True))


async def interruptible(
    progress: Progress, body: Callable[[StatusLine], Awaitable[object]]
) -> bool:
    """Run ``body`` with a fresh status line (also the progress line) to its end, unless
    Ctrl-C comes first and cancels it; True if it did. The line is finished either way."""
    line = StatusLine()
    progress.line = line
    interrupted = False
    try:
        with anyio.open_signal_receiver(signal.SIGINT) as signals:
            async with anyio.create_task_group() as tg:

                async def on_signal() -> None:
                    nonlocal interrupted
                    async for _ in signals:
                        interrupted = True
                        tg.cancel_scope.cancel()
                        return

                tg.start_soon(on_signal)
                await body(line)
                tg.cancel_scope.cancel()
    finally:
        line.done()
    return interrupted


#: the exit status when stdout's reader went away (``mcptask ... | head``): 128 + SIGPIPE,
#: what a shell reports for a command the closed pipe stopped (``set -o pipefail`` sees it)
CLOSED_STDOUT_STATUS = 141


def _broken_pipe(exc: BaseException) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return any(_broken_pipe(inner) for inner in exc.exceptions)
    return isinstance(exc, BrokenPipeError)


def _stdout_closed() -> bool:
    """stdout is a pipe whose reader is gone (not a broken pipe to a server)."""
    try:
        fd = sys.stdout.fileno()
        poller = select.poll()
    except (AttributeError, OSError, ValueError):
        return True  # cannot tell (no poll): the likeliest pipe is stdout
    poller.register(fd, select.POLLOUT)
    return any(event & (select.POLLERR | select.POLLHUP) for _, event in poller.poll(0))


def _quiet_exit() -> NoReturn:
    # Python flushes stdout again at exit: onto /dev/null, so no "Exception ignored" either
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    raise SystemExit(CLOSED_STDOUT_STATUS)


def quiet_on_closed_stdout(main: Callable[[list[str] | None], None]) -> Callable[..., None]:
    """``main`` exiting quietly, status 141, when its reader closes stdout early
    (``mcptask tasks list URL | head -5``): the standard recipe, no traceback."""

    def flushed() -> None:
        try:
            sys.stdout.flush()  # what is still buffered: a closed pipe fails here, not at exit
        except BrokenPipeError:
            _quiet_exit()

    @functools.wraps(main)
    def run(argv: list[str] | None = None) -> None:
        try:
            main(argv)
        except SystemExit:
            flushed()
            raise
        except BaseException as exc:
            if _broken_pipe(exc) and _stdout_closed():
                _quiet_exit()
            raise
        flushed()

    return run
