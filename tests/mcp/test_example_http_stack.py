"""The example server's ``--http-stack``: ``auto`` (default) runs uvicorn's httptools parser on
the uvloop event loop when they are installed, ``h11`` the pure-Python parser on plain asyncio.

uvicorn serves on the event loop ``anyio.run`` starts, so uvloop is chosen through anyio's
``use_uvloop`` backend option, not uvicorn's ``loop`` setting. Both stacks serve the whole
benchmark workload in ``tests/bench/test_peers_quick.py``.
"""

from __future__ import annotations

import importlib.util
import sys

import pytest

from mcp_tasks.examples import server as example


def test_auto_is_the_default_and_uses_uvloop_when_installed() -> None:
    args = example._parse_args(["--http", "127.0.0.1:1"])
    assert args.http_stack == "auto"
    want = {"use_uvloop": True} if importlib.util.find_spec("uvloop") else {}
    assert example.backend_options(args) == want


def test_h11_runs_on_plain_asyncio() -> None:
    args = example._parse_args(["--http", "127.0.0.1:1", "--http-stack", "h11"])
    assert args.http_stack == "h11" and example.backend_options(args) == {}


def test_stdio_never_uses_uvloop_and_refuses_the_flag() -> None:
    assert example.backend_options(example._parse_args(["--stdio"])) == {}
    with pytest.raises(SystemExit):
        example._parse_args(["--stdio", "--http-stack", "h11"])
    with pytest.raises(SystemExit):
        example._parse_args(["--http", "127.0.0.1:1", "--http-stack", "httptools"])


def test_the_mcp_extra_installs_the_default_stack() -> None:
    assert importlib.util.find_spec("httptools") is not None
    if sys.platform != "win32":  # uvloop has no Windows build
        assert importlib.util.find_spec("uvloop") is not None


def test_each_stack_keeps_its_parser_with_the_slow_client_deadlines() -> None:
    """The slow-client deadlines are mixed into the stack's own uvicorn protocol class."""
    from uvicorn.protocols.http.h11_impl import H11Protocol
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    auto = example.http_protocol(example._parse_args(["--http", "127.0.0.1:1"]))
    h11 = example.http_protocol(
        example._parse_args(["--http", "127.0.0.1:1", "--http-stack", "h11", "--send-timeout", "3"])
    )
    assert issubclass(auto, HttpToolsProtocol) and issubclass(h11, H11Protocol)
    assert h11.deadlines.send_timeout == 3 and auto.deadlines.header_timeout == 10
