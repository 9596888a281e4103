"""Test kits for users of this package: ``store_conformance`` checks a ``TaskStore``
(and the shared protocol of a ``SharedTaskStore``) against this package's own types.
Needs pytest and anyio's pytest plugin (installed with anyio)."""
