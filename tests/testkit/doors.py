"""The two front doors of our HTTP server, as a fixture parameter.

A task request reaches the one router through either door:

- ``endpoint``: the task endpoint (``runtime/serve/endpoint.py``), on by default, answering the
  task methods in front of the SDK's Streamable HTTP endpoint;
- ``sdk``: the SDK's own request pipeline (``runtime/serve/sdk_door.py``): the example server's
  ``--no-task-endpoint``, ``McpTasks.streamable_http_app(task_endpoint=False)`` in process.

Every fixture that starts our server over HTTP takes :func:`front_door`, so every test that
uses one runs through both doors by construction (``test_x[endpoint]``, ``test_x[sdk]``). A
fixture whose parameters mix HTTP with other targets (stdio, a peer's server) takes
:func:`http_targets` as its parameters (``test_x[http-endpoint]``, ``test_x[http-sdk]``,
``test_x[stdio]``) and a :class:`testkit.example_server.ServerPool` for the servers. A
test of something only one door has pins it, saying why in its docstring::

    @pinned("endpoint")  # the task endpoint's own counters
    def test_counts(...): ...

Both doors run only where the door is what is tested (the endpoint, the router, the wire,
security and isolation, end-to-end protocol tests). Where it is not (workers, operators'
surfaces, the CLI, restarts, outages), the module or test is marked ``door_agnostic``
(``pytestmark = pytest.mark.door_agnostic``) and runs through :data:`DEFAULT_DOOR`, the one the
shipped server uses; ``tests/conftest.py`` applies the marker, and ``pytest -m door_agnostic``
selects those tests.
"""

from __future__ import annotations

import pytest

ENDPOINT = "endpoint"
SDK = "sdk"
FRONT_DOORS = (ENDPOINT, SDK)
#: the door a ``door_agnostic`` test runs through: the shipped server's (the task endpoint)
DEFAULT_DOOR = ENDPOINT
#: the marker of tests where the door is not what is tested
DOOR_AGNOSTIC = "door_agnostic"


def _known(door: str) -> str:
    if door not in FRONT_DOORS:
        raise ValueError(f"front door {door!r}: expected one of {FRONT_DOORS}")
    return door


def door_args(door: str) -> tuple[str, ...]:
    """The example server's flags for ``door``."""
    return ("--no-task-endpoint",) if _known(door) == SDK else ()


def task_endpoint(door: str) -> bool:
    """``McpTasks.streamable_http_app(task_endpoint=...)`` for ``door``."""
    return _known(door) == ENDPOINT


@pytest.fixture(scope="module", params=FRONT_DOORS)
def front_door(request: pytest.FixtureRequest) -> str:
    """Which door serves the task requests of the servers this test starts (module scope,
    so a module's shared server is started once per door)."""
    door: str = request.param
    return door


#: Parameters of a fixture that reaches our server over HTTP through each door or otherwise
#: (``stdio``, a peer): ``http_targets("stdio")`` -> ``["http-endpoint", "http-sdk", "stdio"]``.
HTTP_PREFIX = "http-"


def http_targets(*others: str) -> list[str]:
    """Our server over HTTP through each door, then ``others``."""
    return [*(HTTP_PREFIX + door for door in FRONT_DOORS), *others]


def door_of(target: str) -> str | None:
    """The door of an :func:`http_targets` parameter; ``None`` for the others."""
    return _known(target[len(HTTP_PREFIX) :]) if target.startswith(HTTP_PREFIX) else None


def pinned(door: str) -> pytest.MarkDecorator:
    """Run a test (or, as ``pytestmark``, a module) through ``door`` only."""
    return pytest.mark.parametrize("front_door", [_known(door)], indirect=True)


def one_door_for_agnostic(metafunc: pytest.Metafunc) -> None:
    """``pytest_generate_tests`` (first of them): a ``door_agnostic`` test that uses
    :func:`front_door` runs through :data:`DEFAULT_DOOR` only (a test pinned to a door keeps
    its pin)."""
    if "front_door" not in metafunc.fixturenames:
        return
    if metafunc.definition.get_closest_marker(DOOR_AGNOSTIC) is None:
        return
    for mark in metafunc.definition.iter_markers("parametrize"):
        names = mark.args[0] if mark.args else mark.kwargs.get("argnames", "")
        if "front_door" in (names.split(",") if isinstance(names, str) else names):
            return  # pinned() already chose
    # as a mark, as pinned() does: pytest then leaves the fixture's own params out
    metafunc.definition.add_marker(pinned(DEFAULT_DOOR))
