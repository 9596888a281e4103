"""Fixtures for tests/mcp live in ``testkit.mcp_e2e`` (importable by the test modules too)."""

from testkit.mcp_e2e import (  # noqa: F401
    anyio_backend,
    connect,
    http_server,
    http_server_factory,
    http_server_pool,
    tokens_file,
)
