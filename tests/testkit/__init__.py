"""The test suite's helpers, one package: ``from testkit.procs import free_port``.

``tests/`` is on the import path through pytest's configuration (``pythonpath`` in
``pyproject.toml``), never through ``sys.path`` edits; a Python child the suite starts gets
it on ``PYTHONPATH`` from :func:`testkit.procs.python_env` (``python -m testkit.NAME``).
pytest rewrites the asserts of every module here (``tests/conftest.py``).

This module imports nothing: ``benchmarks/`` imports :mod:`testkit.fastmcp_peer` (standard
library only) without pytest.

A new test that needs a server: which fixture
-------------------------------------------------

The suite runs on four pytest-xdist workers, a module on one worker (``--dist loadfile``), in
about eight minutes on two cores, bound by CPU; a server process costs a tenth of
a second of CPU to start warm (see **Starts**) and a second cold, a shared one nothing, so
share one unless the test needs its own.

- **Shared** (the default): ``http_server`` (``testkit.mcp_e2e``, module scope, one per front
  door) or a module-scoped :class:`testkit.example_server.ServerPool` keyed by the server's
  flags (``pool.get(door, "--tokens", path)``); the Redis of the session, ``redis_server`` /
  ``redis_url``. Isolate the test by what it owns, not by the process: its own bearer token
  (one requestor), its own session, its own Redis namespace (``unique_namespace()``).
- **Its own** (``http_server_factory``, ``server_factory``, ``ops_server_factory``,
  ``fresh_redis_server``): only a test that kills, restarts or stops the server, exhausts a
  server-wide limit (sessions in all, tasks kept in all, file descriptors), needs flags no
  other test uses, or reads the server's whole log or metrics as its own.
- **Front doors**: a fixture that starts our server over HTTP takes ``front_door``, so its
  tests run through both doors. Where the door is not what is tested (workers, operators'
  surfaces, the CLI, restarts, outages), mark the module ``pytest.mark.door_agnostic``: one
  door (:mod:`testkit.doors`).
- **Ports**: another worker may take a ``free_port()`` before a server binds it. Start a
  server process through :func:`testkit.procs.wait_listening` (it checks, in ``/proc``,
  that the listener is that process's, and raises ``PortTaken`` otherwise; the example
  server, the peers and Redis then move to another port); a port where nothing must answer
  is held with :func:`testkit.procs.refusing_port`.
- **Starts**: the example server (``HttpServer``, ``OpsServer``) and ``mcptask``
  (``testkit.ops.mcptask``) are forked from one process per worker that has imported them
  (:mod:`testkit.warm`: about 0.1 s of CPU a start instead of 0.9), and run as
  ``python -m`` runs them; a start in another environment is a new interpreter, and
  ``MCPTASK_TEST_WARM=0`` makes every start one. Start another server module with
  :func:`testkit.warm.start_python` to get the same.
- **Waiting**: :mod:`testkit.wait` (``until``, ``until_async``), never a bare sleep; a server
  is stopped by PID, killed after :data:`testkit.procs.STOP_GRACE_S`.
- **Type checks**: :func:`testkit.typecheck.mypy_strict`, marked ``TYPECHECK``: one cache for
  every check of the run.
- **Peers** (node_modules, the FastMCP venv): installed before the suite by
  ``tests/install_peers.py``, never in a test.
"""
