"""The SDK's checks of a Streamable HTTP POST, as the task endpoint makes them before it
answers a request itself: the Host/Origin/Content-Type and ``Accept`` checks
(:func:`post_checks_pass`) and the classification of a request of a per-request-envelope
revision (:func:`modern_route`). Part of :mod:`._sdk` (which re-exports every name here and
is where the rest of the package imports them from); apart only to keep each module short.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Mapping
from typing import Any

from mcp.server.streamable_http import check_accept_headers
from mcp.server.transport_security import TransportSecurityMiddleware
from mcp.shared.inbound import (
    InboundLadderRejection,
    classify_inbound_request,
    find_duplicated_routing_header,
)

__all__ = ["HeaderView", "modern_route", "post_checks_pass", "transport_security"]


def transport_security(manager: Any) -> Any:
    """The SDK's Host/Origin check with the session manager's settings."""
    return TransportSecurityMiddleware(manager.security_settings)


class HeaderView:
    """A request as the SDK's header checks read it (``check_accept_headers``,
    ``TransportSecurityMiddleware.validate_request``): only ``request.headers.get(name)``,
    names in lower case. ``headers``: the request's headers by lower-case name, the first of
    repeated ones (what Starlette's ``Headers.get`` answers), built once per request instead
    of a Starlette ``Request`` whose headers are scanned and decoded at every lookup."""

    __slots__ = ("headers",)

    def __init__(self, headers: Mapping[str, str]) -> None:
        self.headers = headers


#: the header values the checks of :func:`post_checks_pass` read, in this order
_CHECKED = ("content-type", "host", "origin", "accept")
#: the passes remembered per check, at most
_PASSES_MAX = 256
#: ``security`` -> (its settings as they were, the header values that passed them)
_PASSED: weakref.WeakKeyDictionary[Any, tuple[Any, set[tuple[Any, ...]]]] = (
    weakref.WeakKeyDictionary()
)


def _settings_key(security: Any) -> Any:
    settings = getattr(security, "settings", None)
    if settings is None:
        return None
    return (
        settings.enable_dns_rebinding_protection,
        tuple(settings.allowed_hosts),
        tuple(settings.allowed_origins),
    )


async def post_checks_pass(security: Any, headers: Mapping[str, str], json_only: bool) -> bool:
    """Whether a POST with ``headers`` (lower-case names) passes the SDK's checks of its
    Content-Type, Host and Origin (``security``: :func:`transport_security`) and ``Accept``
    (JSON, and SSE unless the endpoint answers ``json_only``).

    The checks read nothing but those four values and ``security``'s settings, and a client
    sends the same ones on every request: a pass is remembered for the values and settings
    it was found for (a bounded set), so the next request with them is not checked again.
    A refusal is never remembered (the SDK's path answers it, logging it each time)."""
    key = (json_only, *map(headers.get, _CHECKED))
    settings = _settings_key(security)
    try:
        known, passed = _PASSED[security]
    except (KeyError, TypeError):  # not seen yet (or not weakly referenceable)
        known, passed = None, set()
    if known == settings and key in passed:
        return True
    request: Any = HeaderView(headers)  # what the checks read of a Starlette Request
    if await security.validate_request(request, is_post=True) is not None:
        return False
    has_json, has_sse = check_accept_headers(request)
    if not (has_json and (json_only or has_sse)):
        return False
    if known != settings or len(passed) >= _PASSES_MAX:
        passed = set()
    passed.add(key)
    with contextlib.suppress(TypeError):
        _PASSED[security] = (settings, passed)
    return True


def modern_route(doc: Any, scope: Any, headers: Mapping[str, str]) -> Any | None:
    """The SDK's classification of a request of a per-request-envelope revision (its
    ``protocol_version``, ``client_info``, ``client_capabilities``), or None when the SDK
    would refuse it (a repeated routing header, a header/body mismatch, a bad envelope)."""
    raw = scope.get("headers", ())
    # ``headers`` holds each name once: when the request repeats none, even ignoring case,
    # no routing header is repeated and the SDK's check of the raw lines can only pass
    repeats = not isinstance(raw, (list, tuple)) or len(raw) != len(headers)
    if repeats or len({name.lower() for name in headers}) != len(headers):
        # the SDK's check reads only the names: the values are not decoded for it
        names = ((k.decode("latin-1"), "") for k, _ in raw)
        if find_duplicated_routing_header(names) is not None:
            return None
    route = classify_inbound_request(doc, headers=headers)
    return None if isinstance(route, InboundLadderRejection) else route
