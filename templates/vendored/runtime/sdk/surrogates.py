"""The ``mcp`` SDK's 2025-11-25 Streamable HTTP transport made to take JSON holding a lone
surrogate escape (``"\\ud800"``), as its 2026-07-28 transport does: the one place this
package changes the SDK rather than reading it (:mod:`._sdk` is where it reads it, and
re-exports :func:`take_lone_surrogates` and :func:`loads_json`). The change has a canary in
``tests/mcp/test_sdk_canary.py`` like every assumption of :mod:`._sdk`.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from typing import Any

import pydantic_core

__all__ = ["loads_json", "take_lone_surrogates"]

#: A ``\\uXXXX`` escape of a UTF-16 surrogate: JSON may carry one alone (``"\\ud800"``),
#: which ``pydantic_core`` refuses and ``json.loads`` takes.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def loads_json(data: bytes | str, **kwargs: Any) -> Any:
    """``data`` parsed as ``pydantic_core.from_json`` parses it, or as ``json.loads`` does
    when it holds a string with a lone surrogate escape (``"\\ud800"``: valid JSON that
    ``pydantic_core`` refuses and the SDK's 2026-07-28 transport takes); whatever else
    ``pydantic_core`` refuses raises its ``ValueError`` as before."""
    try:
        return pydantic_core.from_json(data, **kwargs)
    except ValueError as exc:
        refused = exc
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if _SURROGATE_ESCAPE.search(raw) is not None:
        try:
            return json.loads(raw)
        except (ValueError, RecursionError):
            pass
    raise refused


class _LenientPydanticCore:
    """``pydantic_core`` as the SDK's 2025-11-25 transport module sees it: ``from_json``
    is :func:`loads_json`, the rest is ``pydantic_core``'s."""

    from_json = staticmethod(loads_json)

    def __getattr__(self, name: str) -> Any:
        return getattr(pydantic_core, name)


class _Escaped:
    """A JSON-RPC message as ``json.dumps`` writes it (ASCII: a lone surrogate escaped
    again), for the transport's writers when pydantic's JSON cannot encode it."""

    __slots__ = ("message",)

    def __init__(self, message: Any) -> None:
        self.message = message

    def model_dump_json(self, **kwargs: Any) -> str:
        return json.dumps(self.message.model_dump(mode="json", **kwargs), separators=(",", ":"))


_LENIENT_MARK = "__mcp_tasks_lone_surrogates__"


def take_lone_surrogates() -> None:
    """Make the SDK's 2025-11-25 Streamable HTTP transport take a request holding a lone
    surrogate escape (``"\\ud800"``), as its 2026-07-28 one does, and write an answer
    holding one (a tool's echo of it) escaped again, instead of ``-32700`` for the request
    and a failed write for the answer. Once per process, for every server of it: only what
    the transport refused or could not write changes (:func:`loads_json`, then the
    transport's own JSON writers, retried with ``json.dumps`` when pydantic's fails)."""
    from mcp.server import streamable_http

    transport = streamable_http.StreamableHTTPServerTransport
    if getattr(transport, _LENIENT_MARK, False):
        return
    module: Any = streamable_http  # its parser is the module's name ``pydantic_core``
    module.pydantic_core = _LenientPydanticCore()
    json_response: Any = transport._create_json_response
    event_data: Any = transport._create_event_data

    @functools.wraps(json_response)  # the SDK's own stays readable (its canary reads it)
    def _create_json_response(self: Any, response_message: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return json_response(self, response_message, *args, **kwargs)
        except pydantic_core.PydanticSerializationError:
            return json_response(self, _Escaped(response_message), *args, **kwargs)

    @functools.wraps(event_data)
    def _create_event_data(self: Any, event_message: Any) -> Any:
        try:
            return event_data(self, event_message)
        except pydantic_core.PydanticSerializationError:
            escaped = dataclasses.replace(event_message, message=_Escaped(event_message.message))
            return event_data(self, escaped)

    transport._create_json_response = _create_json_response  # type: ignore[method-assign]
    transport._create_event_data = _create_event_data  # type: ignore[method-assign]
    setattr(transport, _LENIENT_MARK, True)
