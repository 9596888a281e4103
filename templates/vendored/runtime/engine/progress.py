"""Progress as a task's ``statusMessage``: what a face without progress notifications for
tasks (the tasks extension: X-NOTIF-7) shows while the work runs (the ``DetailedTask``'s
``statusMessage``, which ``tasks/get`` and ``notifications/tasks`` carry).

A tool's ``report_progress(progress, total, message)`` becomes one line
(:func:`progress_text`), written to the task by :class:`ProgressNotes` at most once per
``EngineConfig.progress_message_interval_s``: the first report at once, later ones as the
interval allows, and the last one of a burst when its interval ends, so a chatty tool costs
a bounded number of store writes and its latest progress is what readers see.

Built from narrow inputs (the interval, whether a task runs here, the message write, the
group later writes run in); it imports no other part of the engine.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import anyio
import anyio.abc

from ..logs import logger

log = logger("runtime")

__all__ = ["ProgressNotes", "progress_text"]


def progress_text(progress: float, total: float | None = None, message: str | None = None) -> str:
    """``"message (40%)"``, ``"message"``, ``"4 of 10 (40%)"`` or ``"4"``."""
    share = f" ({progress / total:.0%})" if total else ""
    if message:
        return f"{message}{share}"
    if total:
        return f"{progress:g} of {total:g}{share}"
    return f"{progress:g}"


class _Note:
    __slots__ = ("pending", "written_at", "scheduled")

    def __init__(self) -> None:
        self.pending: str | None = None
        self.written_at = float("-inf")
        self.scheduled = False


class ProgressNotes:
    """The throttled ``statusMessage`` writes of one engine's running tasks."""

    def __init__(
        self,
        interval_s: float,
        running: Callable[[str], bool],
        write: Callable[[str, str], Awaitable[None]],
        group: Callable[[], anyio.abc.TaskGroup | None],
    ) -> None:
        self.interval_s = interval_s
        self._running = running
        self._write_message = write
        self._group = group
        self._notes: dict[str, _Note] = {}
        self._prune_at = 64

    async def note(self, task_id: str, text: str) -> None:
        """Show ``text`` as the task's ``statusMessage`` (throttled; see the module)."""
        if not self._running(task_id):
            return  # not running here (ended, or another instance's)
        note = self._notes.get(task_id)
        if note is None:
            self._prune()
            note = self._notes[task_id] = _Note()
        note.pending = text
        if note.scheduled:
            return  # the end of this interval writes the latest text
        wait = note.written_at + self.interval_s - time.monotonic()
        if wait <= 0:
            await self._write(task_id, note)
            return
        group = self._group()
        if group is None:
            return
        note.scheduled = True
        group.start_soon(self._later, task_id, note, wait)

    async def _later(self, task_id: str, note: _Note, wait: float) -> None:
        await anyio.sleep(wait)
        note.scheduled = False
        if not self._running(task_id):
            self._notes.pop(task_id, None)
            return
        await self._write(task_id, note)

    async def _write(self, task_id: str, note: _Note) -> None:
        text, note.pending = note.pending, None
        if text is None:
            return
        note.written_at = time.monotonic()
        try:
            await self._write_message(task_id, text)
        except Exception:  # progress is informational: a failed write never fails the work
            log.warning("task %s: progress not shown", task_id, exc_info=True)

    def _prune(self) -> None:
        """Forget the notes of tasks no longer running here (amortised: when many)."""
        notes = self._notes
        if len(notes) >= self._prune_at:
            for task_id in [t for t in notes if not self._running(t)]:
                del notes[task_id]
            self._prune_at = max(64, 2 * len(notes))
