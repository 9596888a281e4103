"""Waiting in tests for something to happen: poll the observable condition with a deadline.

A test never sleeps for a guessed time to let something happen (a task end, a server
start, a session idle out): on a loaded machine the guess is too short, on an idle one it
wastes time. It waits on an event when the code under test offers one, and otherwise polls
the condition it is waiting for with these helpers, which return as soon as it holds and
fail, naming what was awaited and the last value seen, once a generous deadline passes.

    task = until(lambda: client.ok("tasks/get", {"taskId": tid}), satisfied=is_terminal)
    await until_async(lambda: engine.running == 0, what="the runs wind down")

Sleeping remains right where the sleep *is* the behaviour under test: a tool that works for
N seconds, the pacing of a soak's traffic, a client that polls at an interval.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio

T = TypeVar("T")

#: Seconds: generous, for a loaded 2-core machine; nothing waits that long when all is well.
DEFAULT_TIMEOUT = 60.0


class WaitTimeout(AssertionError):
    """The awaited condition did not hold before the deadline."""


def _describe(what: str | None, predicate: Callable[..., Any]) -> str:
    if what:
        return what
    name = getattr(predicate, "__qualname__", repr(predicate))
    try:
        line = inspect.getsourcelines(predicate)[1]
        return f"{name} (line {line})"
    except (OSError, TypeError):
        return name


def _timed_out(what: str, timeout: float, last: Any, error: BaseException | None) -> WaitTimeout:
    detail = f"last value: {last!r}" if error is None else f"last error: {error!r}"
    return WaitTimeout(f"not within {timeout:g}s: {what} ({detail[:2000]})")


def until(
    probe: Callable[[], T],
    timeout: float = DEFAULT_TIMEOUT,
    *,
    satisfied: Callable[[T], Any] = bool,
    interval: float = 0.05,
    ignoring: tuple[type[BaseException], ...] = (),
    what: str | None = None,
) -> T:
    """Call ``probe()`` every ``interval`` seconds until ``satisfied(value)`` (by default: the
    value is truthy); that value. Exceptions in ``ignoring`` count as "not yet". Raises
    :class:`WaitTimeout` after ``timeout`` seconds (a probe that blocks is not interrupted:
    give it a timeout of its own, as the HTTP clients of the suite have)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    error: BaseException | None = None
    while True:
        try:
            value = probe()
        except ignoring as exc:
            error = exc
        else:
            if satisfied(value):
                return value
            last, error = value, None
        if time.monotonic() >= deadline:
            raise _timed_out(_describe(what, probe), timeout, last, error)
        time.sleep(interval)


async def until_async(
    probe: Callable[[], T | Awaitable[T]],
    timeout: float = DEFAULT_TIMEOUT,
    *,
    satisfied: Callable[[T], Any] = bool,
    interval: float = 0.01,
    ignoring: tuple[type[BaseException], ...] = (),
    what: str | None = None,
) -> T:
    """:func:`until` for async tests: ``probe`` may be a plain or an async callable; a probe
    that blocks is cancelled at the deadline too."""
    last: Any = None
    error: BaseException | None = None
    with anyio.move_on_after(timeout):
        while True:
            try:
                value = probe()
                if inspect.isawaitable(value):
                    value = await value
            except ignoring as exc:
                error = exc
            else:
                if satisfied(value):  # type: ignore[arg-type]
                    return value  # type: ignore[return-value]
                last, error = value, None
            await anyio.sleep(interval)
    raise _timed_out(_describe(what, probe), timeout, last, error)
