"""Run one pure step in a forked child while the parent goes on.

A cold run is two independent chains: datamodel-code-generator (mostly its own import) and
rendering plus formatting the templates. The command forks as soon as it starts (see
``launcher``): the child imports datamodel-code-generator while the parent parses options
and reads the schema, then waits for its input (the selected definitions), runs the step and
hands back its value, or its exception, pickled through a pipe. It leaves with ``os._exit``
so no buffer, ``atexit`` hook or test harness of the parent runs twice.

Where ``fork`` is missing or unsafe (no ``os.fork``, macOS, a process with other threads
running) or ``MCPTASK_GEN_NO_FORK`` is set, the step runs inline when its result is first
asked for: same result, one core.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from mcptask_gen.errors import GeneratorError

T = TypeVar("T")


def can_fork() -> bool:
    return (
        hasattr(os, "fork")
        and sys.platform != "darwin"
        and threading.active_count() == 1
        and not os.environ.get("MCPTASK_GEN_NO_FORK")
    )


class Background(Generic[T]):
    """``fn(value)`` in a child process forked now; ``send(value)`` starts it, ``result()``
    joins. ``prepare()`` runs in the child at once (imports), before the value arrives.

    Without fork nothing runs until ``result()``, which then calls ``fn`` inline. Use as a
    context manager: leaving the block early (the parent failed first, or no longer needs
    the step) kills and reaps the child, so no process outlives the run.
    """

    def __init__(
        self,
        fn: Callable[[Any], T],
        *,
        prepare: Callable[[], object] | None = None,
        fork: bool | None = None,
    ) -> None:
        self._fn = fn
        self._value: Any = None
        self._sent = False
        self._pid = 0
        self._out = -1  # parent reads the answer
        self._in = -1  # parent writes the input
        if not (can_fork() if fork is None else fork):
            return
        fds: list[int] = []
        try:
            fds += os.pipe()
            fds += os.pipe()
            pid = os.fork()
        except OSError:  # no processes or descriptors left: run inline instead
            for fd in fds:
                os.close(fd)
            return
        out_r, out_w, in_r, in_w = fds
        if pid == 0:  # the child: never returns
            os.close(out_r)
            os.close(in_w)
            self._child(prepare, in_r, out_w)
        os.close(out_w)
        os.close(in_r)
        self._pid, self._out, self._in = pid, out_r, in_w

    @property
    def forked(self) -> bool:
        return self._pid != 0

    def _child(self, prepare: Callable[[], object] | None, in_fd: int, out_fd: int) -> None:
        code = 0
        try:
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent reports an interrupt
            try:
                if prepare is not None:
                    prepare()
                with os.fdopen(in_fd, "rb") as pipe:
                    data = pipe.read()
                if not data:  # the parent closed without sending: not needed after all
                    os._exit(0)
                payload = pickle.dumps((True, self._fn(pickle.loads(data))))
            except BaseException as exc:
                payload = _pickled_error(exc)
            with os.fdopen(out_fd, "wb") as pipe:
                pipe.write(payload)
        except BaseException:
            code = 1
        finally:
            os._exit(code)

    def send(self, value: object) -> None:
        """Give the step its input (once)."""
        self._sent = True
        if not self._pid:
            self._value = value
            return
        data = pickle.dumps(value)
        try:
            with os.fdopen(self._in, "wb") as pipe:
                self._in = -1
                pipe.write(data)
        except BrokenPipeError:
            pass  # the child died; result() reports how

    def result(self) -> T:
        if not self._sent:
            raise RuntimeError("Background.result() before send()")  # would wait forever
        if not self._pid:
            return self._fn(self._value)
        with os.fdopen(self._out, "rb") as pipe:
            self._out = -1
            data = pipe.read()
        _, status = os.waitpid(self._pid, 0)
        self._pid = 0
        if not data:
            raise GeneratorError(
                f"the background worker died without an answer ({_describe(status)})"
            )
        try:
            ok, value = pickle.loads(data)
        except Exception as exc:
            raise GeneratorError(
                f"the background worker's answer could not be read: {exc}"
            ) from None
        if ok:
            return value  # type: ignore[no-any-return]
        raise value

    def close(self) -> None:
        """Kill and reap a child whose result is no longer wanted."""
        if self._pid:
            try:
                os.kill(self._pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(self._pid, 0)
            self._pid = 0
        for fd in (self._in, self._out):
            if fd >= 0:
                os.close(fd)
        self._in = self._out = -1

    def __enter__(self) -> Background[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_adopted: Background[Any] | None = None


def adopt(job: Background[Any]) -> None:
    """Keep a job started early (``launcher``) for the pipeline to ``take``."""
    global _adopted
    discard()
    _adopted = job


def take() -> Background[Any] | None:
    """The job started early, if any; the caller now owns it (and closes it)."""
    global _adopted
    job, _adopted = _adopted, None
    return job


def discard() -> None:
    """Kill a job started early that nobody took (an error, --help, a cache hit)."""
    job = take()
    if job is not None:
        job.close()


def _pickled_error(exc: BaseException) -> bytes:
    import traceback

    tb = "".join(traceback.format_exception(exc)).rstrip()
    try:
        if not isinstance(exc, (GeneratorError, RecursionError, MemoryError)):
            exc.add_note(f"in the background worker:\n{tb}")
        return pickle.dumps((False, exc))
    except Exception:  # an exception that does not pickle: keep its text
        return pickle.dumps((False, GeneratorError(f"{type(exc).__name__}: {exc}")))


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit status {os.waitstatus_to_exitcode(status)}"
