"""Test kits for users of this package: ``store_conformance`` checks a ``TaskStore``
(and the shared protocol of a ``SharedTaskStore``) against this package's own types.
Runs on pytest and anyio's pytest plugin (installed with anyio); the package type-checks
without pytest (``pytest_api`` types the few names it uses)."""
