"""Fixtures for the interoperability tests: ``npm ci`` for the TypeScript peers, and our
example server over Streamable HTTP, one per front door (``http_server_pool``, for fixtures
whose parameters are :func:`testkit.doors.http_targets`; ``http_server``), from
``testkit.mcp_e2e`` as the mcp tests have them."""

from __future__ import annotations

import pytest

from testkit.interop import npm_ci
from testkit.mcp_e2e import http_server, http_server_pool

__all__ = ["http_server", "http_server_pool"]


@pytest.fixture(scope="session")
def node_modules() -> None:
    """``npm ci`` (pinned by package-lock.json) when node_modules is missing or stale."""
    npm_ci()
