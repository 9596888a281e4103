"""Shared pytest fixtures."""

from __future__ import annotations

import pytest

# the shared helpers (tests/testkit) assert: pytest explains their failed asserts like a test
# module's. Registered before any of them is imported.
pytest.register_assert_rewrite("testkit")

from testkit.doors import front_door, one_door_for_agnostic  # noqa: E402  (after the rewrite)

__all__ = ["front_door"]


@pytest.fixture
def anyio_backend() -> str:
    """anyio's pytest plugin runs ``@pytest.mark.anyio`` tests on asyncio."""
    return "asyncio"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The benchmarks' smoke tests (``tests/bench/``, ``test_bench_*.py``) are marked
    ``bench``: the README's test command leaves them out (``-m "not bench"`` in
    ``pyproject.toml``), CI runs them apart (``pytest -m bench``)."""
    for item in items:
        if "bench" in item.path.parts or item.path.name.startswith("test_bench_"):
            item.add_marker(pytest.mark.bench)


@pytest.hookimpl(tryfirst=True)  # before pytest parametrizes front_door with its own params
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    one_door_for_agnostic(metafunc)
