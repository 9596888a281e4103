"""Shared pytest fixtures."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    """anyio's pytest plugin runs ``@pytest.mark.anyio`` tests on asyncio."""
    return "asyncio"
