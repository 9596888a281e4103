"""The test suite's helpers, one package: ``from testkit.procs import free_port``.

``tests/`` is on the import path through pytest's configuration (``pythonpath`` in
``pyproject.toml``), never through ``sys.path`` edits; a Python child the suite starts gets
it on ``PYTHONPATH`` from :func:`testkit.procs.python_env` (``python -m testkit.NAME``).
pytest rewrites the asserts of every module here (``tests/conftest.py``).

This module imports nothing: ``benchmarks/`` imports :mod:`testkit.fastmcp_peer` (standard
library only) without pytest.
"""
