"""The handler machinery behind the generated ``handlers`` module: hand-written, copied verbatim.

``handlers`` subclasses ``HandlerBase`` once with the revision's tables (one method per
``tasks/*`` request, one hook per task-augmentable request type) and its dispatch tables.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from .errors import InvalidParams, MethodNotFound, TaskError, describe_validation_error

M = TypeVar("M", bound=BaseModel)


class Unimplemented(MethodNotFound):
    """A handler method the subclass did not implement (-32601)."""

    def __init__(self, method: str, handler: str) -> None:
        super().__init__(message=f"Method not found: {method} is not implemented by {handler}")


@dataclass(frozen=True, slots=True)
class RequestContext:
    """Who asks, and about which request. ``requestor`` is the identity tasks are bound to
    (an auth subject when there is one, else a session key: R-SEC-1)."""

    requestor: str
    request_id: str | int | None = None
    progress_token: str | int | None = None
    meta: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AugmentedRequest(Generic[M]):
    """A task-augmented request as a hook receives it (R-CREATE-1); ``task`` is its validated
    task metadata."""

    method: str
    params: Mapping[str, Any]
    task: M
    progress_token: str | int | None = None


class NoParams(BaseModel):
    """The params of a method whose schema defines none: any object, kept as is."""

    model_config = ConfigDict(extra="allow", defer_build=True)


def dump(result: BaseModel) -> dict[str, Any]:
    """Wire JSON of a result model: by alias, only the fields that were set (``ttl: null`` kept)."""
    out: dict[str, Any] = result.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return out


#: method -> (params model, handler method name)
Table = Mapping[str, tuple[type[BaseModel], str]]


class HandlerBase:
    """Validation and dispatch over the tables a generated subclass sets."""

    #: ``tasks/*`` request -> (params model, handler method name)
    requests: ClassVar[Table] = {}
    #: task-augmentable method -> hook method name
    hooks: ClassVar[Mapping[str, str]] = {}
    #: notification method -> (params model, handler method name)
    notifications: ClassVar[Table] = {}
    #: The model of a request's task metadata, and the params member carrying it.
    task_metadata: ClassVar[type[BaseModel]] = NoParams
    task_param: ClassVar[str] = "task"
    #: Requests the client must declare the face's capability for, on the request itself;
    #: checked before the params (a face of an extension: X-CAP-9, X-ERR-5).
    gated: ClassVar[frozenset[str]] = frozenset()

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
        try:
            parsed = model.model_validate(params or {})
        except ValidationError as exc:
            raise InvalidParams(detail=describe_validation_error(exc)) from None
        result = await getattr(self, handler)(parsed, ctx)
        return dump(result)

    async def dispatch_augmented(
        self, method: str, params: Mapping[str, Any], ctx: RequestContext
    ) -> dict[str, Any]:
        """Call the hook of a task-augmented request; return its wire answer (R-CREATE-2)."""
        hook = self.hooks.get(method)
        if hook is None:
            raise MethodNotFound(detail=f"{method} cannot be task-augmented")
        try:
            task = self.task_metadata.model_validate(params.get(self.task_param) or {})
        except ValidationError as exc:
            prefix = f"params.{self.task_param}"
            raise InvalidParams(detail=describe_validation_error(exc, prefix)) from None
        meta = params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, Mapping) else None
        request = AugmentedRequest(
            method=method,
            params=params,
            task=task,
            progress_token=token if isinstance(token, (str, int)) else None,
        )
        result = await getattr(self, hook)(request, ctx)
        return dump(result)

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
