"""Shared pytest fixtures."""

from __future__ import annotations

import pytest

# shared helpers that assert: pytest explains their failed asserts like a test module's
pytest.register_assert_rewrite("mcp_e2e", "sec_harness")


@pytest.fixture
def anyio_backend() -> str:
    """anyio's pytest plugin runs ``@pytest.mark.anyio`` tests on asyncio."""
    return "asyncio"
