"""A core task's input requests pushed on the requestor's standalone channel (2025-11-25).

A requestor SHOULD call ``tasks/result`` once a task is ``input_required`` (R-INPUT-3), and
the input requests then ride that request's own stream. Some requestors only poll
``tasks/get`` and wait for the question to come to them: the 2025-11-25 transport lets a
server send a request on any stream the client keeps open, the HTTP ``GET`` stream included,
and the client expects messages there. So when a ``tasks/get`` of a core task answers
``input_required`` (the requestor knows the task: a question its work asked before the
``CreateTaskResult`` went out is never pushed ahead of it), and no ``tasks/result`` of that
task waits with a stream to carry its questions (``CoreTasks.carrying``), :class:`InputPush`
sends the task's outstanding input requests on the connection that asked, outside any
request: its ``GET`` stream (open now, not merely replayable) or its stdio stream, with the
related-task ``_meta`` (R-INPUT-2).

A push is a ``tasks/result`` without a response of its own: it claims the questions it sends
through the engine's waiter exactly as a ``tasks/result`` does, so a later ``tasks/result``
does not ask them again, and whichever path an answer comes by settles the question once.
It ends when the task is ``working`` again or terminal; a later ``tasks/get`` pushes what
is asked after. When the ``GET`` stream closes, or the connection fails, the push stops and
its unanswered questions are released for a ``tasks/result`` or the next push. Without a
stream to carry them (stateless HTTP, a session with no ``GET`` stream open, a handler
without the engine) nothing is pushed: ``tasks/result`` delivers them, as before.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final

import anyio

from ...errors import TaskError
from ...protocol import TERMINAL, WORKING
from ..engine.runs import InputHandler, PendingInput
from ..engine.task_engine import TaskEngine
from ..engine.waiting import await_settled
from ..faces.core import FACE, stamped
from ..sdk import Connection, MCPError, from_sdk_error, standalone_delivers
from .identity import has_channel

__all__ = ["WATCH_S", "InputPush"]

log = logging.getLogger(__name__)

#: how often a wait for a client looks whether it is still there: a push, whether the ``GET``
#: stream it sends on is still open; the task endpoint's waiting ``tasks/result``, whether
#: its client left or its session ended
WATCH_S: Final = 0.5
#: where a push stops: its task is working again (every question answered) or ended
_UNTIL: Final = frozenset({*TERMINAL, WORKING})
#: a connection that went away while a pushed question waited for its answer
_GONE = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)


class InputPush:
    """The pushes of one server's core face (see the module's docstring)."""

    def __init__(self, server: Any, core: Any) -> None:
        self.server = server
        self.core = core
        #: ids of the tasks being pushed now (one push per task)
        self.pushing: set[str] = set()
        #: how many input requests were pushed
        self.pushed = 0

    def offer(self, requestor: str, task_id: str, conn: Connection | None) -> None:
        """A ``tasks/get`` of ``conn`` answered ``input_required`` for ``task_id``: push its
        outstanding input requests there, unless a push or a ``tasks/result`` carries them
        or nothing could carry them."""
        engine = getattr(self.core, "engine", None)
        if conn is None or not isinstance(engine, TaskEngine) or task_id in self.pushing:
            return
        carrying: Mapping[str, int] = getattr(self.core, "carrying", {})
        if carrying.get(task_id) or not has_channel(conn):
            return
        if not standalone_delivers(self.server, conn, replay=False):
            return
        tg = engine.task_group
        if tg is None:
            return
        self.pushing.add(task_id)
        tg.start_soon(self._push, engine, requestor, task_id, conn)

    async def _push(self, engine: TaskEngine, requestor: str, task_id: str, conn: Any) -> None:
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._watch, conn, tg.cancel_scope)
                send = self._sender(conn, tg.cancel_scope)
                try:
                    await await_settled(engine, requestor, task_id, FACE, _UNTIL, send)
                except TaskError as exc:  # gone, expired, the store blinks: tasks/result then
                    log.debug("task %s: input push stopped: %s", task_id, exc.message)
                tg.cancel_scope.cancel()
        except Exception:  # never the engine's task group's failure
            log.exception("task %s: input push failed", task_id)
        finally:
            self.pushing.discard(task_id)

    async def _watch(self, conn: Any, scope: anyio.CancelScope) -> None:
        """Stop the push (its claims released) once its stream is no longer open."""
        while standalone_delivers(self.server, conn, replay=False):
            await anyio.sleep(WATCH_S)
        scope.cancel()

    def _sender(self, conn: Any, scope: anyio.CancelScope) -> InputHandler:
        async def send(p: PendingInput) -> dict[str, Any]:
            request = stamped(p)  # R-INPUT-2
            self.pushed += 1
            try:
                answer: dict[str, Any] = await conn.send_raw_request(request.method, request.params)
                return answer
            except MCPError as exc:  # the client's JSON-RPC error: its answer
                raise from_sdk_error(exc) from None
            except _GONE:
                # No answer can come: stop, releasing the question for another delivery.
                scope.cancel()
                await anyio.sleep_forever()
                raise  # pragma: no cover - cancelled above

        return send
