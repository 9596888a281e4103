"""Shared pytest fixtures."""

from __future__ import annotations

import pytest

# the shared helpers (tests/testkit) assert: pytest explains their failed asserts like a test
# module's. Registered before any of them is imported.
pytest.register_assert_rewrite("testkit")

from testkit.doors import front_door  # noqa: E402  (after the rewrite is registered)

__all__ = ["front_door"]


@pytest.fixture
def anyio_backend() -> str:
    """anyio's pytest plugin runs ``@pytest.mark.anyio`` tests on asyncio."""
    return "asyncio"
