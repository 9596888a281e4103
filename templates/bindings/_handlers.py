"""The handler machinery behind each face's generated ``handlers`` module: hand-written,
copied verbatim.

A face's ``handlers`` subclasses ``HandlerBase`` once as ``TasksHandlerBase``, with the
face's tables (one method per ``tasks/*`` request, one hook per request that may become a
task, one method per task notification). Each generated method is a :func:`stub`: it
answers ``-32601`` until a subclass overrides it, and :meth:`HandlerBase.serves` tells which
ones a handler overrides (a server advertises only those: R-CAP-1, X-CAP-2).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, ValidationError

from .errors import InvalidParams, MethodNotFound, TaskError, describe_validation_error

M = TypeVar("M", bound=BaseModel)
F = TypeVar("F", bound=Callable[..., Any])

#: ``RequestContext.extra`` key of the request's decoded routing-name header, when it had
#: one (the extension face's ``Mcp-Name``, checked against the params by its handler).
ROUTING_NAME: str = "routing_name"
#: The attribute :func:`stub` sets on a generated method a subclass has not overridden.
STUB_MARK = "__mcptask_stub__"

#: A request the handler sends to the requestor on the stream of the request it serves
#: (``method``, ``params``) -> the requestor's result; a ``TaskError`` for an error answer.
SendRequest = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]
#: The work of a request that became a task, as the server runs it: called with the task's
#: context (the default runtime's ``TaskContext``) once, in the background; its wire result.
Work = Callable[[Any], Awaitable[dict[str, Any]]]


def stub(fn: F) -> F:
    """Mark a generated method as not implemented (it answers ``-32601``)."""
    setattr(fn, STUB_MARK, True)
    return fn


class NeedsStream(Exception):
    """A request the handler can answer only on a stream to the requestor
    (``RequestContext.send_request``), which the front door that asked has not: the server
    answers it through a front door that has one (the SDK's path)."""


class Unimplemented(MethodNotFound):
    """A handler method the subclass did not implement (-32601)."""

    def __init__(self, method: str, handler: str) -> None:
        super().__init__(message=f"Method not found: {method} is not implemented by {handler}")


@dataclass(frozen=True, slots=True)
class RequestContext:
    """Who asks, and about which request. ``requestor`` is the identity tasks are bound to
    (an auth subject when there is one, else a session key: R-SEC-1, X-SEC-1).

    ``progress_token`` is the request's own ``_meta.progressToken``; ``meta`` its ``_meta``;
    ``send_request`` (when the transport has a stream for it) sends a request to the
    requestor on this request's own stream (the input requests of a ``tasks/result``,
    R-INPUT-3); ``extra`` carries what a face reads from the transport (routing headers).
    ``budget`` names what the requestor's new tasks count against among the tasks and bytes
    kept (R-SEC-4) when it is shared with other requestors (``address:ADDR``: every requestor
    without a token at one client address), None when it is the requestor's own."""

    requestor: str
    request_id: str | int | None = None
    progress_token: str | int | None = None
    meta: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    send_request: SendRequest | None = None
    budget: str | None = None


@dataclass(slots=True)
class AugmentedRequest(Generic[M]):
    """A request that becomes a task, as its hook receives it (R-CREATE-1, X-CAP-4).

    ``params`` are the request's own, without the ``task`` param; ``task`` is that param
    validated (a face without one: an empty :class:`NoParams`), to be read, not changed. ``work`` runs the request
    itself (the tool through the server's pipeline, the client's callback) when the hook
    starts it: a handler over its own job system may ignore it and submit ``params``."""

    method: str
    params: Mapping[str, Any]
    task: M
    work: Work | None = None


class NoParams(BaseModel):
    """The params of a method whose schema defines none: any object, kept as is."""

    model_config = ConfigDict(extra="allow", defer_build=True)


def dump(model: BaseModel) -> dict[str, Any]:
    """A model as wire JSON: the one rule for every model this package sends, hands on or
    reads back (its own bindings' and the SDK's): by alias, JSON mode, and a field that is
    None left out (``exclude_none``) unless the model requires it, or ``model`` itself does
    not declare it (an extra field a peer sent, kept as it came): those stay ``null``.

    So an optional field never set, or set to None, is absent (as the SDK sends its own
    models, and as the schemas want: ``null`` is no value of an optional field there), and
    a field the schema requires but allows ``null`` for is always sent (``Task.ttl: null``,
    an unlimited task; a JSON-RPC error's ``id: null``), as is a ``null`` a peer sent in a
    field the model does not know. Fields with a default that is not None are sent
    (``"type": "text"``, ``"isError": false``): ``exclude_unset`` would drop them. (The
    serializer itself, without ``model_dump``'s Python wrapper: this runs on every answer;
    the nulls are put back only in models that can hold one.)"""
    out: dict[str, Any] = model.__pydantic_serializer__.to_python(
        model, mode="json", by_alias=True, exclude_none=True
    )
    plan = _null_plan(type(model))
    if plan is not None:
        _put_nulls(model, out, plan)
    extra = model.__pydantic_extra__
    if extra:
        for key, value in extra.items():
            if value is None:
                out.setdefault(key, None)
    return out


#: Where a model class's required nulls are put back: (field name, its wire name, whether
#: it is a required field that may be None) of the fields to look at: those, and those that
#: may hold a model with such a field (None: nothing to put back)
_NullPlan = tuple[tuple[str, str, bool], ...]
_NULL_PLANS: dict[type[BaseModel], _NullPlan | None] = {}
#: the plan of a model whose plan is being made (a model that holds itself, or one that
#: holds it): not None, so a field that may hold it is looked at
_MAKING: _NullPlan = ()


def _null_plan(cls: type[BaseModel]) -> _NullPlan | None:
    if cls in _NULL_PLANS:
        return _NULL_PLANS[cls]
    _NULL_PLANS[cls] = _MAKING
    fields = []
    for name, info in cls.model_fields.items():
        wire_name = info.serialization_alias or info.alias or name
        annotation = info.annotation
        if info.is_required() and _may_be_none(annotation):
            fields.append((name, wire_name, True))
        elif any(_null_plan(m) is not None for m in _models_in(annotation)):
            fields.append((name, wire_name, False))
    plan = _NULL_PLANS[cls] = tuple(fields) if fields else None
    return plan


def _may_be_none(annotation: Any) -> bool:
    return annotation in (None, type(None), Any, object) or type(None) in get_args(annotation)


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The model classes an annotation names (in unions, lists, mappings...)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    value = getattr(annotation, "__value__", None)  # a type alias
    if value is not None:
        return _models_in(value)
    return [m for arg in get_args(annotation) for m in _models_in(arg)]


def _put_nulls(model: BaseModel, out: dict[str, Any], plan: _NullPlan) -> None:
    for name, wire_name, required in plan:
        value = getattr(model, name, None)
        if value is None:
            if required and wire_name not in out:
                out[wire_name] = None
        elif wire_name in out:
            _nested_nulls(value, out[wire_name])


def _nested_nulls(value: Any, out: Any) -> None:
    if isinstance(value, BaseModel):
        plan = _null_plan(type(value))
        if plan is not None and isinstance(out, dict):
            _put_nulls(value, out, plan)
    elif isinstance(value, (list, tuple)) and isinstance(out, list):
        for item, item_out in zip(value, out, strict=False):
            _nested_nulls(item, item_out)
    elif isinstance(value, Mapping) and isinstance(out, dict):
        for key, item in value.items():
            if key in out:
                _nested_nulls(item, out[key])


#: The empty task metadata of each model (a ``task: {}`` param, the common case), made once.
_NO_TASK: dict[type[BaseModel], BaseModel] = {}


def _empty(model: type[M]) -> M:
    """``model()``, made once per model: a hook reads ``request.task``, never changes it."""
    made = _NO_TASK.get(model)
    if made is None:
        made = _NO_TASK[model] = model()
    return made  # type: ignore[return-value]


def _integral(value: Any) -> Any:
    """``value`` with every integral float (``1500.0``) as an int, in objects and arrays."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _integral(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_integral(v) for v in value]
    return value


#: method -> (params model, handler method name)
Table = Mapping[str, tuple[type[BaseModel], str]]

#: The class attribute caching a handler class's wire variants in use (``HandlerBase._wire``).
_WIRE_TABLE = "__mcptask_wire__"


def _wire_table(cls: type[HandlerBase]) -> dict[str, tuple[str, tuple[tuple[str, Any], ...]]]:
    """Handler method -> (its wire variant, the methods it stands for with their functions),
    for the variants ``cls`` may call instead: ``cls`` says they are ready, and resolves each
    variant and every method it stands for to the definitions of the class that defines the
    variant (none overridden below it)."""
    table: dict[str, tuple[str, tuple[tuple[str, Any], ...]]] = {}
    if not cls.wire_ready():
        return table
    for name, (wire, covers) in cls.wire_variants.items():
        owner = next((k for k in cls.__mro__ if wire in k.__dict__), None)
        if owner is None:
            continue
        own = owner.__dict__
        if all(n in own and getattr(cls, n, None) is own[n] for n in (wire, *covers)):
            table[name] = (wire, tuple((n, own[n]) for n in covers))
    return table


class HandlerBase:
    """Validation and dispatch over the tables a generated subclass sets."""

    #: The face's name: the protocol revision it speaks (``protocol.FACES``' key).
    face: ClassVar[str] = ""
    #: ``tasks/*`` request -> (params model, handler method name)
    requests: ClassVar[Table] = {}
    #: method that may become a task -> hook method name
    hooks: ClassVar[Mapping[str, str]] = {}
    #: notification method -> (params model, handler method name)
    notifications: ClassVar[Table] = {}
    #: ``tasks/*`` request -> the type of its result
    results: ClassVar[Mapping[str, Any]] = {}
    #: the answer of a request that became a task
    created: ClassVar[type[BaseModel]] = NoParams
    #: The model of a request's task metadata, and the params member carrying it ("": none).
    task_metadata: ClassVar[type[BaseModel]] = NoParams
    task_param: ClassVar[str] = "task"
    #: Requests the client must declare the face's capability for, on the request itself;
    #: checked before the params (a face of an extension: X-CAP-9, X-ERR-5).
    gated: ClassVar[frozenset[str]] = frozenset()
    #: A handler's answers as wire JSON at once: handler method -> (the method that answers
    #: as wire JSON, the methods it stands for). Dispatch calls the wire one, instead of
    #: building the result model and dumping it again, only while none of the methods it
    #: stands for is overridden below the class that defines it and that class's
    #: :meth:`wire_ready` says so (a default handler on the bindings whose models it is
    #: known to answer exactly as): a subclass that overrides one is called through the
    #: typed method, as always.
    wire_variants: ClassVar[Mapping[str, tuple[str, tuple[str, ...]]]] = {}

    @classmethod
    def wire_ready(cls) -> bool:
        """Whether this class's :attr:`wire_variants` answer as its typed methods would."""
        return False

    def _wire(self, name: str) -> Callable[..., Awaitable[dict[str, Any]]] | None:
        """The wire variant of handler method ``name`` to call instead (None: the typed one)."""
        cls = type(self)
        table: dict[str, tuple[str, tuple[tuple[str, Any], ...]]] | None = cls.__dict__.get(
            _WIRE_TABLE
        )
        if table is None:
            table = _wire_table(cls)
            setattr(cls, _WIRE_TABLE, table)
        entry = table.get(name)
        if entry is None:
            return None
        wire, stands_for = entry
        for method, fn in stands_for:  # still as found: none set on the class since
            if getattr(cls, method, None) is not fn:
                return None
        return getattr(self, wire)  # type: ignore[no-any-return]

    def serves(self, method: str) -> bool:
        """Whether this handler implements ``method``: a ``tasks/*`` request, a request
        that may become a task (its hook) or a notification, overridden from its stub."""
        entry = self.requests.get(method) or self.notifications.get(method)
        name = entry[1] if entry is not None else self.hooks.get(method)
        if name is None:
            return False
        return not getattr(getattr(type(self), name, None), STUB_MARK, False)

    def without_task(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """``params`` without the face's task param (:attr:`task_param`): the request as
        its own work runs it (the one place that param is left out)."""
        task_param = self.task_param
        if not task_param:  # a face without one (the extension's, X-CREATE-5)
            return dict(params)
        return {k: v for k, v in params.items() if k != task_param}

    def declared(self, ctx: RequestContext) -> bool:
        """Whether the request of ``ctx`` declared the face's capability (gated methods)."""
        return True

    def missing_capability(self) -> TaskError:
        """The error of a gated request that did not declare the capability."""
        return MethodNotFound(detail="capability not declared")

    async def dispatch(
        self, method: str, params: Mapping[str, Any] | None, ctx: RequestContext
    ) -> dict[str, Any]:
        """Validate ``params`` for a ``tasks/*`` request, call its handler, return the wire result."""
        entry = self.requests.get(method)
        if entry is None:
            raise MethodNotFound(detail=method)
        if method in self.gated and not self.declared(ctx):
            raise self.missing_capability()
        model, handler = entry
        if getattr(getattr(type(self), handler, None), STUB_MARK, False):
            raise Unimplemented(method, type(self).__name__)  # before its params are read
        try:
            parsed = model.model_validate(params or {})
        except ValidationError as exc:
            raise InvalidParams(detail=describe_validation_error(exc)) from None
        return await self._answer(handler, parsed, ctx)

    async def dispatch_augmented(
        self,
        method: str,
        params: Mapping[str, Any],
        ctx: RequestContext,
        *,
        work: Work | None = None,
    ) -> dict[str, Any]:
        """Call the hook of a request that becomes a task; its wire answer at once
        (R-CREATE-2, X-CREATE-1). ``params`` may carry the ``task`` param (validated here
        and left out of the hook's ``params``)."""
        hook = self.hooks.get(method)
        if hook is None:
            raise MethodNotFound(detail=f"{method} cannot be task-augmented")
        if getattr(getattr(type(self), hook, None), STUB_MARK, False):
            raise Unimplemented(f"{method} (as a task)", type(self).__name__)
        task_param = self.task_param
        own = self.without_task(params)
        raw_task = params.get(task_param) if task_param else None
        try:
            # Strict (no "10" for 10, no true for 1), but an integral JSON number is an
            # integer whatever its spelling (JSON Schema's "integer": 1500.0 is 1500).
            task = (
                self.task_metadata.model_validate(_integral(raw_task), strict=True)
                if raw_task
                else _empty(self.task_metadata)  # the common empty task param: its defaults
            )
        except ValidationError as exc:
            prefix = f"params.{task_param}"
            raise InvalidParams(detail=describe_validation_error(exc, prefix)) from None
        request = AugmentedRequest(method=method, params=own, task=task, work=work)
        return await self._answer(hook, request, ctx)

    def _answer(self, name: str, request: Any, ctx: RequestContext) -> Awaitable[dict[str, Any]]:
        """The wire answer of handler method ``name`` to ``request``: its wire variant's as it
        is (``wire_variants``, a default handler's: no coroutine of its own on that hot
        path), else its result model dumped."""
        wire = self._wire(name)
        if wire is not None:
            return wire(request, ctx)
        return self._dumped(name, request, ctx)

    async def _dumped(self, name: str, request: Any, ctx: RequestContext) -> dict[str, Any]:
        return dump(await getattr(self, name)(request, ctx))

    async def notify(
        self, method: str, params: Mapping[str, Any] | None, ctx: RequestContext
    ) -> None:
        """Validate and hand a task notification to its method; unknown ones are ignored."""
        entry = self.notifications.get(method)
        if entry is None:
            return
        model, handler = entry
        try:
            parsed = model.model_validate(params or {})
        except ValidationError:
            return
        await getattr(self, handler)(parsed, ctx)
