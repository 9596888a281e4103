"""The one request pipeline: every task rule that is not a face's wire format, once.

Both front doors (the task endpoint in front of the SDK's Streamable HTTP endpoint, and the
SDK's own request pipeline through its hooks) turn a request into a :class:`TaskRequest`
and call :meth:`Router.route`, which

- picks the face of the request's revision and that face's handler (``CoreTasks``,
  ``ExtensionTasks``, or the user's subclass of the face's generated ``TasksHandlerBase``);
- decides, per face, whether a ``tools/call`` becomes a task (R-TOOL-*, R-CREATE-4 on the
  core face, where an unknown tool is left to the SDK to answer as unknown; X-CAP-4, X-CAP-5, X-CAP-8, X-CREATE-5, X-MRTR-1 on the extension's), and hands
  it to the handler's hook with the work that runs the tool, or back as :class:`Pass`;
- reads ``_meta``, the ``progressToken`` and the routing header into the handler's
  :class:`RequestContext`;
- binds the requestor's connection for status notifications and the session's end;
- offers a core task's input requests to :class:`~.mcp_input_push.InputPush` when a
  ``tasks/get`` answers ``input_required`` (a requestor that polls gets them on its stream);
- stamps ``model-immediate-response`` on a core ``CreateTaskResult`` (R-CREATE-3);
- serves only what the server advertises (``tasks/list`` without an identity: R-SEC-2);
- wraps an unexpected exception as a plain ``-32603`` (the traceback goes to the log).

It raises :class:`TaskError` for every refusal (each front door maps it once) and
:class:`NeedsStream` when the request needs a stream the front door has not. What it builds
to advertise (``capabilities.tasks``, ``execution.taskSupport``) is here too, so what is
advertised and what is served follow one rule.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import anyio.lowlevel
from pydantic import BaseModel, ValidationError

from ... import protocol
from ..._handlers import (
    ROUTING_NAME,
    HandlerBase,
    NeedsStream,
    RequestContext,
    Work,
    dump,
)
from ...core.capabilities import build_tasks_capability, check_tool_call
from ...core.meta import MODEL_IMMEDIATE_RESPONSE_KEY
from ...errors import InternalError, InvalidParams, MethodNotFound, TaskError
from ..engine.limits import unmetered
from ..faces import EXTENSION, EXTENSION_DECLARED
from ..sdk import (
    Connection,
    MCPError,
    decode_header_value,
    from_sdk_error,
    input_round_result_type,
    tool_call_params,
    validation_error,
)
from .executors import Executors
from .identity import budget_of, requestor_key
from .input_push import InputPush
from .outbound import PollOutbound, TaskOutbound
from .sessions import Sessions

__all__ = [
    "LISTEN_MAX_BYTES",
    "LISTEN_MAX_IDS",
    "LISTEN_MAX_TASKS",
    "Pass",
    "RunTool",
    "Router",
    "TaskRequest",
    "TaskTools",
    "check_task_support",
    "internal_error",
    "oversized_listen",
    "run_call",
    "task_gone",
    "task_request",
]

log = logging.getLogger(__name__)

#: a tool function, which the ``tool`` decorators return unchanged
ToolFn = TypeVar("ToolFn", bound=Callable[..., Any])

#: A tool run inside a task: ``run(task-scoped outbound, tools/call params)``, through the
#: SDK's own pipeline (its validation, middleware, the tool, its result checks).
RunTool = Callable[[Any, dict[str, Any]], Awaitable[Any]]
#: the most task ids one ``subscriptions/listen`` is notified about (the rest are left out of
#: its acknowledgement, X-NOTIF-3)
LISTEN_MAX_TASKS: Final = 100
#: the most task ids one ``subscriptions/listen`` may name (more is refused, ``-32602``)
LISTEN_MAX_IDS: Final = 10 * LISTEN_MAX_TASKS
#: the most bytes of a ``subscriptions/listen`` request: its ids (up to 256 bytes each) and
#: 64 KiB besides; a bigger one is refused before its body is parsed (:func:`oversized_listen`)
LISTEN_MAX_BYTES: Final = 256 * LISTEN_MAX_IDS + (64 << 10)
#: the task ids a listen looks up between two turns of the event loop given to others
_LISTEN_BATCH: Final = 32
#: The ``Mcp-Name`` routing header, lower-case (X-HTTP-1).
_NAME_HEADER: Final = EXTENSION.ROUTING_NAME_HEADER.lower() if EXTENSION is not None else ""
#: The ``Mcp-Method`` routing header, lower-case (X-HTTP-1).
_METHOD_HEADER: Final = EXTENSION.ROUTING_METHOD_HEADER.lower() if EXTENSION is not None else ""


def oversized_listen(headers: Mapping[str, str], size: int) -> TaskError | None:
    """The refusal (``-32602``) of a request whose ``Mcp-Method`` header says it is a
    ``subscriptions/listen`` and whose body of ``size`` bytes is over
    :data:`LISTEN_MAX_BYTES` (it would name more ids than a listen may), else ``None``: a
    front door that has the body unparsed refuses it without parsing it (a 4 MiB body takes
    the event loop tens of milliseconds to parse)."""
    if EXTENSION is None or size <= LISTEN_MAX_BYTES:
        return None
    if headers.get(_METHOD_HEADER) != EXTENSION.NOTIFICATION_CHANNEL:
        return None
    return InvalidParams(
        detail=f"a {EXTENSION.NOTIFICATION_CHANNEL} request of {size} bytes (at most"
        f" {LISTEN_MAX_BYTES}, for at most {LISTEN_MAX_IDS} task ids)"
    )


def task_gone(exc: TaskError) -> bool:
    """Whether a ``tasks/get`` refused says the task is not there for its requestor (unknown,
    another's, expired: ``-32602``), rather than that the read failed (the store, a limit,
    the handler): only the first ends what follows a task."""
    return isinstance(exc, InvalidParams)


def check_task_support(task_support: Mapping[str, object]) -> dict[str, str]:
    """``task_support`` checked: every value one of the schema's ``taskSupport`` values
    (``ValueError`` naming the tool and the allowed values otherwise)."""
    out: dict[str, str] = {}
    for name, value in task_support.items():
        if not isinstance(name, str) or value not in protocol.TASK_SUPPORT_VALUES:
            allowed = ", ".join(repr(v) for v in protocol.TASK_SUPPORT_VALUES)
            raise ValueError(f"task_support[{name!r}] = {value!r}: expected one of {allowed}")
        out[name] = str(value)
    return out


class TaskTools:
    """Which tools may run as tasks (``taskSupport`` per tool name: R-TOOL-2, A-22), and
    which of them gather their input before the task exists (X-MRTR-1)."""

    def __init__(self, task_support: Mapping[str, object] | None = None) -> None:
        self.support: dict[str, str] = check_task_support(task_support or {})
        #: tools whose MRTR input round comes before the task (the extension face)
        self.gather_first: set[str] = set()
        #: tools whose task work runs on worker processes -> runs allowed (1 + retries)
        self.on_workers: dict[str, int] = {}

    def declare(
        self,
        name: str,
        task_support: str,
        *,
        gather_first: bool = False,
        on_workers: bool = False,
        retries: int = 0,
    ) -> None:
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ValueError(f"tool {name!r}: retries = {retries!r}: expected an integer >= 0")
        if retries and not on_workers:
            raise ValueError(f"tool {name!r}: retries apply to tools on_workers only")
        self.support.update(check_task_support({name: task_support}))
        if gather_first:
            self.gather_first.add(name)
        if on_workers:
            self.on_workers[name] = 1 + retries
        else:
            self.on_workers.pop(name, None)

    def tool(
        self,
        name: str | None = None,
        task_support: str = protocol.TASK_SUPPORT_OPTIONAL,
        *,
        gather_first: bool = False,
        on_workers: bool = False,
        retries: int = 0,
    ) -> Callable[[ToolFn], ToolFn]:
        """Declare a tool's ``execution.taskSupport``: ``tools.tool("slow", "required")``, or
        as a decorator beside ``@mcp.tool()`` (the function's name by default). On a
        ``TaskTools`` of its own this needs no ``McpTasks`` yet (nor a store): give it to
        ``McpTasks(..., tools=...)`` once the store is chosen. ``gather_first``: on the
        tasks extension's face, a call without ``inputResponses`` runs inline so that the
        tool's SDK resolvers answer ``input_required`` before any task exists (X-MRTR-1).

        ``on_workers``: the tool's task work runs on worker processes (``python -m
        PACKAGE.worker``, :mod:`.offload`), not in this one; needs a ``RedisTaskStore``.
        ``retries``: how many more times such a tool runs, on another worker, when the
        worker running it dies (0: its task fails then)."""
        opts: dict[str, Any] = {
            "gather_first": gather_first, "on_workers": on_workers, "retries": retries
        }  # fmt: skip
        if name is not None:
            self.declare(name, task_support, **opts)

        def mark(fn: ToolFn) -> ToolFn:
            key = name if name is not None else str(getattr(fn, "__name__", ""))
            self.declare(key, task_support, **opts)
            return fn

        return mark

    def unknown(self, names: Iterable[str]) -> list[str]:
        """The declared tools the server does not have."""
        return sorted(set(self.support) - set(names))


@dataclass(slots=True)
class TaskRequest:
    """A request as a front door hands it to the router (no transport in it)."""

    #: the protocol revision the request speaks (its session's, or its own envelope's)
    version: str | None
    method: str
    params: dict[str, Any]
    id: str | int | None
    requestor: str
    #: whether ``requestor`` identifies someone (R-SEC-2)
    identified: bool = True
    #: the client's connection: status notifications, the session's end, a task's tool
    connection: Connection | None = None
    #: the request's HTTP headers, lower-case names (the extension's routing header)
    headers: Mapping[str, str] | None = None
    #: the request's own stream to the requestor (``tasks/result`` input requests)
    send_request: Any = None
    #: how this front door runs a ``tools/call`` through the SDK's pipeline
    run_tool: RunTool | None = None


def task_request(
    *, session_id: str | None, address: str | None, stdio: Any = None, **fields: Any
) -> TaskRequest:
    """The :class:`TaskRequest` (``fields``: the rest of its fields) both front doors hand
    the router, its requestor derived by the one rule (:func:`~.identity.requestor_key`):
    the bearer token's subject, else the ``stdio`` connection's own key, else the transport
    session ``session_id``, else anonymous at the client's ``address``."""
    fields["requestor"], fields["identified"] = requestor_key(session_id, address, stdio)
    return TaskRequest(**fields)


def internal_error(exc: BaseException, what: str) -> InternalError:
    """The one answer to an unexpected exception, whichever door or step met it: logged
    with its traceback (``what`` failed), and a plain ``-32603 Internal error`` for the
    client (no exception text, addresses or library details)."""
    log.error("%s failed", what, exc_info=exc)
    return InternalError(message="Internal error")


class Pass:
    """Not answered by the router: the SDK serves the request itself, with ``params``
    (a ``tools/call`` that does not become a task, its ``task`` param left out)."""

    __slots__ = ("params",)

    def __init__(self, params: dict[str, Any]) -> None:
        self.params = params


def _wire(result: Any) -> dict[str, Any]:
    """A model's wire JSON (the one rule: :func:`~mcp_tasks._handlers.dump`), a mapping as is."""
    if isinstance(result, BaseModel):
        return dump(result)
    return dict(result or {})


def _meta(params: Mapping[str, Any]) -> Mapping[str, Any] | None:
    meta = params.get("_meta")
    if meta is None or type(meta) is dict:  # what JSON gives (no ABC check on the hot path)
        return meta
    return meta if isinstance(meta, Mapping) else None


def _progress_token(meta: Mapping[str, Any] | None) -> str | int | None:
    token = meta.get("progressToken") if meta is not None else None
    return token if isinstance(token, (str, int)) and not isinstance(token, bool) else None


async def run_call(
    run_tool: RunTool, outbound: Any, call: dict[str, Any], *, core: bool
) -> dict[str, Any]:
    """A task's ``tools/call`` through ``run_tool`` with its task-scoped ``outbound``, as the
    task's result (in this process or on a worker): the SDK's errors as task errors."""
    try:
        result = await run_tool(outbound, call)
    except MCPError as exc:
        raise from_sdk_error(exc) from None
    except ValidationError as exc:
        raise validation_error(exc) from None
    out = _wire(result)
    if not core and out.get("resultType") == input_round_result_type():
        raise InternalError(  # MRTR inside a task: not served
            detail="the tool asked for input with an input round inside a task"
            " (declare it gather_first, or send the input with the call)"
        )
    return out


class Router:
    """Routes each request to its face's handler (see the module's docstring)."""

    def __init__(
        self,
        handlers: Mapping[str, HandlerBase],
        tools: TaskTools,
        sessions: Sessions,
        *,
        list_without_identity: bool = False,
        immediate_response: str | None = None,
        has_tool: Callable[[str], Awaitable[bool]] | None = None,
        ended: Callable[[str], bool] | None = None,
        push: InputPush | None = None,
        meter: Callable[[str, int], None] | None = None,
    ) -> None:
        self.handlers = handlers
        #: counts a requestor's calls against its rate limit, raising past it (None: none)
        self.meter = meter
        #: a core task's input requests pushed to a requestor that polls (None: never)
        self.push = push
        #: whether a task ended in this process a moment ago (None: never assumed)
        self.ended = ended
        #: whether the server has a tool of that name (None: assume it has)
        self.has_tool = has_tool
        self.tools = tools
        self.sessions = sessions
        self.list_without_identity = list_without_identity
        self.immediate_response = immediate_response
        #: where each tool's task work runs (``open`` while the server runs)
        self.executors = Executors(tools.on_workers)
        self.core = handlers[protocol.REVISION]
        ext = EXTENSION
        self.extension = handlers.get(ext.REVISION) if ext is not None else None
        #: every method the router answers (besides ``tools/call``), on any face
        self.methods = frozenset(m for h in handlers.values() for m in h.requests)
        #: every request a front door hands the router: those and ``tools/call``
        self.routed = frozenset({*self.methods, protocol.TOOLS_CALL})

    # ------------------------------------------------------------------ picking the face
    def handler(self, version: str | None) -> HandlerBase:
        """The handler of the face ``version`` speaks; the core face for any other version
        (its own tasks only: a session that did not negotiate it cannot task-augment)."""
        return self.handlers.get(version or "", self.core)

    def is_extension(self, version: str | None) -> bool:
        return self.extension is not None and version == self.extension.face

    def answers_at_once(self, req: TaskRequest) -> bool:
        """Whether ``req`` is a ``tasks/result`` of a task that ended here a moment ago:
        answered without waiting (a front door need not watch for a client that leaves)."""
        if req.method != protocol.TASKS_RESULT or self.ended is None:
            return False
        task_id = req.params.get("taskId")
        return isinstance(task_id, str) and self.ended(task_id)

    # ------------------------------------------------------------------ routing
    async def route(self, req: TaskRequest) -> dict[str, Any] | Pass:
        """The wire result of ``req``, or :class:`Pass` (see the module's docstring)."""
        try:
            if req.method == protocol.TOOLS_CALL:
                return await self._tool_call(req)
            return await self._tasks_request(req)
        except (TaskError, NeedsStream):
            raise
        except ValidationError as exc:
            raise validation_error(exc) from None
        except Exception as exc:
            raise internal_error(exc, req.method) from None

    def context(self, req: TaskRequest) -> RequestContext:
        """The handler's view of ``req``: ``_meta``, its progress token, the budget its new
        tasks count against (a client address's, R-SEC-4), and on the extension face the
        ``Mcp-Name`` routing header (decoded) for the handler to check (X-HTTP-4)."""
        meta = _meta(req.params)
        extra: dict[str, Any] = {}
        headers = req.headers
        if headers is not None and _NAME_HEADER and _NAME_HEADER in headers:
            if self.is_extension(req.version):
                raw = headers[_NAME_HEADER]
                decoded = decode_header_value(raw)
                # a header that does not decode (a broken base64 form) names no task: it is
                # checked as sent, so it mismatches instead of passing as absent (X-HTTP-4)
                extra[ROUTING_NAME] = decoded if decoded is not None else raw
        return RequestContext(
            requestor=req.requestor,
            request_id=req.id,
            progress_token=_progress_token(meta),
            meta=meta,
            extra=extra,
            send_request=req.send_request,
            budget=budget_of(req.requestor, req.connection),
        )

    async def _tasks_request(self, req: TaskRequest) -> dict[str, Any]:
        handler = self.handler(req.version)
        if handler is self.core:
            if req.method == protocol.TASKS_LIST and not self.lists(req.identified):
                raise MethodNotFound(detail=req.method)  # not declared: not served (R-SEC-2)
            self.sessions.bind(req.requestor, req.connection)
        result = await handler.dispatch(req.method, req.params, self.context(req))
        if (
            req.method == protocol.TASKS_GET
            and self.push is not None
            and handler is self.core
            and result.get("status") == protocol.INPUT_REQUIRED
        ):  # the requestor polls: its questions may come to it (R-INPUT-3)
            self.push.offer(req.requestor, str(req.params.get("taskId")), req.connection)
        return result

    async def _tool_call(self, req: TaskRequest) -> dict[str, Any] | Pass:
        params, parsed = tool_call_params(req.params)
        if self.is_extension(req.version):
            return await self._extension_tool_call(req, params, parsed)
        handler = self.handler(req.version)
        augmented = params.get(self.core.task_param) is not None
        support = self.task_support(parsed.name, handler)
        if support is None and not augmented:
            return Pass(params)  # a tool we do not manage: the SDK answers as usual
        if support is None and self.has_tool is not None and not await self.has_tool(parsed.name):
            # no such tool: the SDK answers that, not that it "does not support" tasks
            return Pass(self.core.without_task(params))
        declared = req.version == protocol.REVISION  # this session speaks tasks (R-CAP-*)
        as_task = check_tool_call(parsed.name, support, augmented=augmented, declared=declared)
        call = self.core.without_task(params)
        if not as_task:
            return Pass(call)
        self.sessions.bind(req.requestor, req.connection)
        self.sessions.watch_end(req.requestor, req.connection)
        work = self._work(req, call, core=True)
        created = await handler.dispatch_augmented(
            protocol.TOOLS_CALL, params, self.context(req), work=work
        )
        if self.immediate_response is not None:  # R-CREATE-3
            meta = dict(created.get("_meta") or {})
            meta.setdefault(MODEL_IMMEDIATE_RESPONSE_KEY, self.immediate_response)
            created["_meta"] = meta
        return created

    async def _extension_tool_call(
        self, req: TaskRequest, params: dict[str, Any], parsed: Any
    ) -> dict[str, Any] | Pass:
        ext, declared, handler = EXTENSION, EXTENSION_DECLARED, self.extension
        assert ext is not None and declared is not None and handler is not None
        call = self.core.without_task(params)  # X-CREATE-5
        support = self.task_support(parsed.name, handler)
        if support not in ext.TASK_SUPPORT_MAY:
            return Pass(call)
        if not declared.declared(_meta(params)):
            if support in ext.TASK_SUPPORT_MUST:
                raise handler.missing_capability()  # X-CAP-8
            return Pass(call)  # X-CAP-5: no task to a request that did not declare it
        if parsed.name in self.tools.gather_first and not parsed.input_responses:
            return Pass(call)  # its input round, before any task (X-MRTR-1)
        work = self._work(req, call, core=False)
        return await handler.dispatch_augmented(ext.TOOLS_CALL, call, self.context(req), work=work)

    def _work(self, req: TaskRequest, call: dict[str, Any], *, core: bool) -> Work:
        """The work of a ``tools/call`` task: the front door's ``run_tool`` with the
        task-scoped outbound of the face (progress and input requests, R-INPUT-*, X-UPD-1)."""
        run_tool, conn, request_id = req.run_tool, req.connection, req.id
        tool = str(call.get("name"))
        if tool in self.tools.on_workers:  # another executor runs it (executors.py)
            caps = getattr(conn, "client_capabilities", None) if conn is not None else None
            handed = self.executors.work(
                tool, call, core=core, connection=conn,
                client_capabilities=_wire(caps) if caps is not None else None,
            )  # fmt: skip
            if handed is not None:
                return handed
        if run_tool is None:
            raise InternalError(detail="this front door cannot run tools")

        if core and conn is None:
            raise InternalError(detail="a core task's tool needs the client's connection")

        async def work(tctx: Any) -> dict[str, Any]:
            outbound = TaskOutbound(conn, tctx, request_id) if conn and core else PollOutbound(tctx)
            return await run_call(run_tool, outbound, call, core=core)

        return work

    # ------------------------------------------------------------------ subscriptions
    async def subscribe(self, req: TaskRequest) -> list[str] | None:
        """The task ids a ``subscriptions/listen`` (the extension face) is notified about:
        ``None`` when it asks for no task (``params.notifications`` without ``taskIds``:
        not ours); a request that did not declare the extension in its own envelope is
        refused (X-NOTIF-4), and so is one naming more than :data:`LISTEN_MAX_IDS` ids; of
        the ids asked, those its requestor's ``tasks/get`` finds, in order, at most
        :data:`LISTEN_MAX_TASKS` (another's task and an unknown id are left out alike:
        X-SEC-1, X-NOTIF-3, X-NOTIF-8).

        Each id named (once) counts as one ``tasks/get`` against the requestor's rate limit,
        all of them as the request arrives (refused at once past the limit, R-SEC-3); the
        reads themselves are then the server's own work, uncounted, a turn of the event loop
        given to others every few ids. An id a handler's ``holds`` (the default extension
        handler's) says it holds no task of costs that lookup only, no ``tasks/get``. A read
        that fails otherwise than "not found" refuses the listen (the client asks again)
        rather than leave a task out in silence."""
        ext, declared, handler = EXTENSION, EXTENSION_DECLARED, self.extension
        if ext is None or declared is None or handler is None:
            return None
        notes = req.params.get("notifications")
        wanted = notes.get(ext.NOTIFICATION_FILTER) if isinstance(notes, Mapping) else None
        if wanted is None:
            return None
        if not declared.declared(_meta(req.params)):
            raise handler.missing_capability()  # X-NOTIF-4
        where = f"params.notifications.{ext.NOTIFICATION_FILTER}"
        if isinstance(wanted, list) and len(wanted) > LISTEN_MAX_IDS:
            raise InvalidParams(
                detail=f"{where}: {len(wanted)} task ids (at most {LISTEN_MAX_IDS})"
            )
        if not isinstance(wanted, list) or not all(isinstance(t, str) for t in wanted):
            raise InvalidParams(detail=f"{where}: expected an array of task ids")
        ids = list(dict.fromkeys(wanted))
        if self.meter is not None:
            self.meter(req.requestor, len(ids))
        # a default handler tells an id it holds no task of without a tasks/get
        holds = getattr(handler, "holds", None)
        agreed: list[str] = []
        with unmetered():
            for n, task_id in enumerate(ids):
                if len(agreed) == LISTEN_MAX_TASKS:
                    break
                if n and not n % _LISTEN_BATCH:
                    await anyio.lowlevel.checkpoint()
                if holds is not None and await holds(req.requestor, task_id) is False:
                    continue
                try:
                    await self.route(self.subscribed_get(req, task_id))
                except TaskError as exc:
                    if task_gone(exc):
                        continue
                    raise
                agreed.append(task_id)
        return agreed

    def subscribed_get(self, req: TaskRequest, task_id: str) -> TaskRequest:
        """The ``tasks/get`` a subscription ``req`` makes of one of its tasks: its requestor's
        (identity included), its ``_meta`` envelope, no id, no routing header."""
        ext = EXTENSION
        assert ext is not None
        params: dict[str, Any] = {ext.ROUTING_NAME_PARAM: task_id}
        meta = _meta(req.params)
        if meta is not None:
            params["_meta"] = dict(meta)
        return dataclasses.replace(
            req,
            version=ext.REVISION,
            method=ext.TASKS_GET,
            params=params,
            id=None,
            headers=None,
            send_request=None,
            run_tool=None,
        )

    # ------------------------------------------------------------------ notifications
    async def notify(self, req: TaskRequest) -> None:
        """A task notification from the client (e.g. the status of a task it runs for the
        server, R-NOTIFY-1) to its face's handler; informational only (R-NOTIFY-2)."""
        await self.handler(req.version).notify(req.method, req.params, self.context(req))

    # ------------------------------------------------------------------ what is advertised
    def task_support(self, tool: str, handler: HandlerBase | None = None) -> str | None:
        """The ``taskSupport`` of ``tool``: None for a tool not declared, or when the face's
        handler does not serve the ``tools/call`` hook (it cannot become a task there)."""
        if handler is None:
            handler = self.core
        if not handler.serves(protocol.TOOLS_CALL):
            return None
        return self.tools.support.get(tool)

    def lists(self, identified: bool) -> bool:
        """Whether ``tasks.list`` is declared (and served) to this requestor (R-SEC-2)."""
        return (identified or self.list_without_identity) and self.core.serves(protocol.TASKS_LIST)

    def core_capability(self, identified: bool) -> dict[str, Any]:
        """``capabilities.tasks`` of the core face (R-CAP-1, R-CAP-2): what the core handler
        overrides, ``tasks.list`` only where a requestor can be told apart (R-SEC-2)."""
        core = self.core
        return build_tasks_capability(
            "server",
            requests=sorted(m for m in protocol.AUGMENTABLE["server"] if core.serves(m)),
            list=self.lists(identified),
            cancel=core.serves(protocol.TASKS_CANCEL),
        )

    def extension_offered(self) -> bool:
        """Whether ``server/discover`` lists the tasks extension (X-CAP-2): its handler
        serves something."""
        handler = self.extension
        if handler is None:
            return False
        return any(handler.serves(m) for m in (*handler.requests, *handler.hooks))
