"""The few pytest names the store-conformance suite uses, typed here: the package then
type-checks (``mypy --strict``) whether pytest is installed or not; it is needed only to
run the suite, and importing the suite without it says so in one line."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, TypeVar

__all__ = ["ANYIO", "fixture", "parametrize", "raises"]

F = TypeVar("F", bound=Callable[..., Any])

if TYPE_CHECKING:

    def fixture(fn: F) -> F:
        """``pytest.fixture``."""

    def parametrize(argnames: str | tuple[str, ...], argvalues: Iterable[Any]) -> Callable[[F], F]:
        """``pytest.mark.parametrize``."""

    def raises(expected_exception: type[BaseException]) -> AbstractContextManager[Any]:
        """``pytest.raises``."""

    #: ``pytest.mark.anyio``: run the suite's async tests on anyio's pytest plugin
    ANYIO: Any = None
else:
    try:
        import pytest
    except ModuleNotFoundError:
        raise ModuleNotFoundError(
            "the store-conformance suite runs on pytest: pip install pytest", name="pytest"
        ) from None
    fixture = pytest.fixture
    parametrize = pytest.mark.parametrize
    raises = pytest.raises
    ANYIO = pytest.mark.anyio
