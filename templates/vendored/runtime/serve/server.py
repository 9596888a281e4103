"""Serve tasks from an ``mcp`` (2.3.x) server: one object, :class:`McpTasks`.

    server = Server("demo", on_list_tools=..., on_call_tool=...)   # or MCPServer("demo")
    tasks = McpTasks(server, task_support={"slow": TASK_SUPPORT_OPTIONAL})
    async with tasks:                                               # runs the task engine
        ...serve server over stdio or Streamable HTTP...

It serves both faces of tasks from one engine and one store: the core face (2025-11-25:
task-augmented ``tools/call``, ``tasks/get|result|list|cancel``, status notifications) and,
when the package carries its bindings, the tasks extension (2026-07-28). Each face's
requests go to that face's handler, an instance of a subclass of the face's generated
``TasksHandlerBase``: the defaults ``CoreTasks`` and ``ExtensionTasks`` on the engine, or
yours (``handlers=(...)``), served the same on every path.

A request's walk: a front door (:mod:`.endpoint` over Streamable HTTP, or the SDK's
own pipeline through :mod:`.sdk_door`) builds the request and calls the one
:class:`~.router.Router`, which routes it to the face's handler; the default handlers
call the :class:`~.engine.TaskEngine`, which calls the store.

Requestor identity (R-SEC-1): :mod:`.mcp_identity`. Status notifications and the end of a
session: :mod:`.mcp_sessions`. Tasks bound to a session are cancelled when the session
ends (stdio EOF, HTTP ``DELETE`` or termination) unless ``cancel_on_session_end=False``.

Private SDK attributes are reached only through ``_sdk``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any

from ..._handlers import HandlerBase
from ...protocol import REVISION, TASK_SUPPORT_OPTIONAL, TaskSupportValue
from ...store import TaskStore
from ..engine.shutdown import drain
from ..engine.task_engine import EngineConfig, TaskEngine
from ..faces import DEFAULTS
from ..faces.adopt import adopt
from ..sdk import (
    http_endpoint,
    lowlevel_server,
    session_manager,
    take_lone_surrogates,
    tidy_argument_errors,
)
from ..sdk.transport import malformed_answer, run_stdio, tidy_http_errors
from .endpoint import install
from .input_push import InputPush
from .outbound import request_client_task
from .router import Router, TaskTools, ToolFn, check_task_support
from .sdk_door import SdkHooks
from .serving import Serving
from .sessions import SessionQuota, Sessions

__all__ = [
    "McpTasks",
    "TaskTools",
    "TaskSupportValue",
    "check_task_support",
    "malformed_answer",
    "request_client_task",
    "run_stdio",
    "tidy_http_errors",
]

log = logging.getLogger(__name__)


def face_handlers(engine: TaskEngine, handlers: Iterable[object]) -> dict[str, HandlerBase]:
    """Each face's handler: the one given for it (at most one per face), else its default
    built on ``engine``. A handler is an instance of a subclass of a face's generated
    ``TasksHandlerBase``, of this package's bindings or of any package the generator wrote
    for a revision this runtime serves (:func:`~.bindings.adopt`; ``TypeError`` otherwise)."""
    out: dict[str, HandlerBase] = {}
    for given in handlers:
        handler = adopt(given)
        face = str(getattr(handler, "face", ""))
        if face not in DEFAULTS:
            raise TypeError(
                f"handlers: {type(given).__name__} speaks revision {face or '(none)'};"
                f" this runtime serves {', '.join(sorted(DEFAULTS))}"
            )
        if face in out:
            raise ValueError(
                f"handlers: two handlers for the face of revision {face}"
                f" ({type(out[face]).__name__}, {type(given).__name__}): give one per face"
            )
        out[face] = handler
    for face, default in DEFAULTS.items():
        if face not in out:
            out[face] = default(engine)  # type: ignore[call-arg]
    return out


#: open Streamable HTTP sessions per requestor, by default (the SDK's global cap: 10,000)
DEFAULT_SESSIONS_PER_REQUESTOR = 1000


class McpTasks:
    """Adds tasks to an ``mcp`` ``Server`` (or ``MCPServer``).

    ``engine``: the task engine (default: one on ``store`` with ``config``). ``handlers``:
    your handlers, at most one per face, each an instance of a subclass of a face's
    generated ``TasksHandlerBase`` (``CoreTasks``/``ExtensionTasks`` or the bare base); a
    face without one gets its default on the engine. ``task_support``: tool name -> one of
    ``TASK_SUPPORT_VALUES`` (tools not listed are ``forbidden``: R-TOOL-2); a bad value is
    refused here, a tool the server does not declare when the server starts. :meth:`tool`
    declares it beside ``@mcp.tool()``; ``tools``: a ``TaskTools`` whose ``tool`` did so
    before this object (and its store) existed. ``list_without_identity``: declare ``tasks.list``
    even when requestors cannot be told apart (R-SEC-2). ``immediate_response``: the
    ``model-immediate-response`` text (R-CREATE-3). ``cancel_on_session_end``: cancel a
    session-bound requestor's unfinished tasks when its session ends.
    Use ``async with tasks:`` around serving; it runs the engine.
    """

    def __init__(
        self,
        server: Any,
        *,
        engine: TaskEngine | None = None,
        handlers: Iterable[object] = (),
        store: TaskStore | None = None,
        config: EngineConfig | None = None,
        task_support: Mapping[str, TaskSupportValue] | None = None,
        tools: TaskTools | None = None,
        list_without_identity: bool = False,
        immediate_response: str | None = None,
        cancel_on_session_end: bool = True,
    ) -> None:
        if engine is not None and (store is not None or config is not None):
            raise ValueError("McpTasks: give an engine, or a store and a config, not both")
        self._server_obj = server
        self.server = lowlevel_server(server)
        tidy_argument_errors(server)  # a tool's bad arguments: their names and reasons
        self.engine = engine if engine is not None else TaskEngine(store, config)
        #: each face's handler, by face name (the revision it speaks)
        self.handlers = face_handlers(self.engine, handlers)
        self.tools = tools if tools is not None else TaskTools()
        self.tools.support.update(check_task_support(task_support or {}))
        self.sessions = Sessions(
            self.server, self.engine, self.handlers, cancel_on_session_end=cancel_on_session_end
        )
        self.router = Router(
            self.handlers,
            self.tools,
            self.sessions,
            list_without_identity=list_without_identity,
            immediate_response=immediate_response,
            has_tool=self.has_tool,
            ended=self.engine.runs.ended,
            push=InputPush(self.server, self.handlers[REVISION]),
            meter=self.engine.rate.check,
        )
        #: the task endpoint of the last :meth:`streamable_http_app` (None: not in use)
        self.task_endpoint: Any = None
        #: the per-requestor session cap of the last :meth:`streamable_http_app`
        self.session_quota: SessionQuota | None = None
        self._tools_checked = False
        #: a low-level ``Server``'s tools, from its last complete ``tools/list`` answer
        self._listed: frozenset[str] | None = None
        #: what this server's doors serve with (they never hold this object)
        self.serving = Serving(
            self.router, self.server, self.sessions, self.engine, self.tools_listed
        )
        SdkHooks(self.serving).install()

    @property
    def task_support(self) -> dict[str, str]:
        """tool name -> its ``taskSupport`` (the tools that may run as tasks)."""
        return self.tools.support

    # ------------------------------------------------------------------ lifecycle
    async def __aenter__(self) -> McpTasks:
        await self.check_tools()
        await self.engine.__aenter__()
        try:
            await self.router.executors.open(self.engine.store)
        except BaseException:
            await self.engine.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(self, *exc: Any) -> None:
        try:
            await self.router.executors.close(*exc)
        finally:
            await self.engine.__aexit__(*exc)

    def tool(
        self,
        name: str | None = None,
        task_support: TaskSupportValue = TASK_SUPPORT_OPTIONAL,
        *,
        gather_first: bool = False,
        on_workers: bool = False,
        retries: int = 0,
    ) -> Callable[[ToolFn], ToolFn]:
        """Declare a tool's ``execution.taskSupport``: ``tasks.tool("slow", TASK_SUPPORT_REQUIRED)``,
        or as a decorator beside ``@mcp.tool()`` (the function's name by default)::

            @tasks.tool(task_support=TASK_SUPPORT_REQUIRED)
            @mcp.tool()
            async def slow(...): ...

        One declaration serves both faces; see :meth:`TaskTools.tool` (``gather_first``,
        ``on_workers`` and ``retries``, and declaring before the store is chosen)."""
        return self.tools.tool(
            name, task_support, gather_first=gather_first, on_workers=on_workers, retries=retries
        )

    async def check_tools(self) -> None:
        """Refuse ``task_support`` entries for tools the server does not declare
        (checked at start for an ``MCPServer``; for a low-level ``Server``, against its
        first ``tools/list`` answer)."""
        list_tools = getattr(self._server_obj, "list_tools", None)
        if list_tools is None or self._server_obj is self.server:
            return
        self._check_names(tool.name for tool in await list_tools())

    async def has_tool(self, name: str) -> bool:
        """Whether the server has a tool ``name`` (a low-level ``Server``: in its last
        ``tools/list`` answer, and True before there was one)."""
        list_tools = getattr(self._server_obj, "list_tools", None)
        if list_tools is not None and self._server_obj is not self.server:
            return any(tool.name == name for tool in await list_tools())
        return self._listed is None or name in self._listed

    def tools_listed(self, names: Iterable[str]) -> None:
        """A complete ``tools/list`` answer: a low-level ``Server``'s tools, known only now."""
        names = self._listed = frozenset(names)
        if self._tools_checked:
            return
        try:
            self._check_names(names)
        except ValueError as exc:
            log.error("McpTasks: %s", exc)

    def _check_names(self, names: Iterable[str]) -> None:
        self._tools_checked = True
        known = list(names)
        unknown = self.tools.unknown(known)
        if unknown:
            raise ValueError(
                f"task_support names tools the server does not declare: {', '.join(unknown)}"
                f" (declared: {', '.join(sorted(known)) or 'none'})"
            )

    # ------------------------------------------------------------------ HTTP
    def streamable_http_app(
        self,
        *,
        task_endpoint: bool = True,
        max_sessions_per_requestor: int | None = DEFAULT_SESSIONS_PER_REQUESTOR,
        **kwargs: Any,
    ) -> Any:
        """The server's Streamable HTTP app (its ``streamable_http_app(**kwargs)``, e.g. the
        SDK's global ``max_sessions`` and ``session_idle_timeout``) with the task endpoint
        (:mod:`.endpoint`) in front of the SDK's endpoint: the task methods are answered
        without the SDK's per-request machinery, every other request goes to the SDK
        unchanged. ``task_endpoint=False``: the SDK's app as it is.
        ``max_sessions_per_requestor``: open sessions per requestor (:class:`SessionQuota`;
        None: only the SDK's global cap). Either way a lone surrogate escape (``"\\ud800"``)
        in a request is taken on both faces (:func:`~._sdk.take_lone_surrogates`)."""
        take_lone_surrogates()
        app = self._server_obj.streamable_http_app(**kwargs)
        app.router.lifespan_context = self._draining(app.router.lifespan_context)
        path = kwargs.get("streamable_http_path", "/mcp")
        self.task_endpoint = None
        self.session_quota = None
        if task_endpoint:
            self.task_endpoint, app = install(self.serving, app, path)
        if max_sessions_per_requestor is not None:
            manager = session_manager(self.server)
            if self.task_endpoint is not None:  # every request that opens one reaches it
                holder, attr = self.task_endpoint, "sdk_app"
            else:
                holder, attr, _ = http_endpoint(app, path)
            self.session_quota = SessionQuota(
                getattr(holder, attr), manager, max_sessions_per_requestor
            )
            setattr(holder, attr, self.session_quota)
        return app

    def _draining(self, lifespan: Any) -> Any:
        """The app's lifespan, whose shutdown (SIGTERM to uvicorn) first lets the tasks
        running here finish (``shutdown_grace_s``): uvicorn ends the process with the signal
        once it returns, so the engine's own exit would come too late."""

        @asynccontextmanager
        async def draining(app: Any) -> AsyncIterator[Any]:
            async with lifespan(app) as state:
                yield state
                engine = self.engine
                await drain(engine.runs.active, engine.config.shutdown_grace_s, engine.log)

        return draining

    async def cancel_requestor_tasks(self, requestor: str) -> int:
        """Cancel every non-terminal task of ``requestor``; how many were cancelled."""
        return await self.engine.cancel_requestor_tasks(requestor, "The task's session ended")
