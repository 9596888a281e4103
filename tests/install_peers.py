"""Install the peers the interoperability tests run against, before the suite (never inside
a test): ``npm ci`` of ``tests/interop`` (the TypeScript SDK, the conformance suite, the
Inspector; pinned by its ``package-lock.json``) and ``tests/interop/.venv-fastmcp`` (FastMCP
4, pinned by ``testkit.fastmcp_peer.PINS``). Each is skipped while its stamp says it is
current, so a second run costs nothing.

    .venv/bin/python tests/install_peers.py

The README's test command runs it before pytest; ``.ci/run`` runs it before that command.
Without it (or without the package registries) the interoperability tests are skipped, and
under ``CI`` they fail, naming this command.
"""

from __future__ import annotations

import sys
import time

from testkit import fastmcp_peer
from testkit.interop import npm_ci


def main() -> int:
    for what, install in (
        ("npm ci in tests/interop", npm_ci),
        ("FastMCP peer venv tests/interop/.venv-fastmcp", fastmcp_peer.ensure_venv),
    ):
        start = time.monotonic()
        try:
            install()
        except Exception as exc:  # every failure is reported, then the exit code
            print(f"install_peers: {what}: failed: {exc}", file=sys.stderr)
            return 1
        print(f"install_peers: {what}: ready ({time.monotonic() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
