"""Fixtures for the interoperability tests: the TypeScript peers' ``node_modules`` (installed
before the suite by ``tests/install_peers.py``), and our
example server over Streamable HTTP, one per front door (``http_server_pool``, for fixtures
whose parameters are :func:`testkit.doors.http_targets`; ``http_server``), from
``testkit.mcp_e2e`` as the mcp tests have them."""

from __future__ import annotations

import pytest

from testkit.interop import node_modules_ready, require_peer
from testkit.mcp_e2e import http_server, http_server_pool

__all__ = ["http_server", "http_server_pool"]


@pytest.fixture(scope="session")
def node_modules() -> None:
    """``node_modules`` from the current package-lock.json: skipped without it (failed under
    ``CI``), naming ``tests/install_peers.py``."""
    require_peer(node_modules_ready(), "tests/interop/node_modules (npm ci)")
