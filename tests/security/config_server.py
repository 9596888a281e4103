"""The example server with its engine limits set: ``config_server.py --engine-config JSON ...``.

Every other argument is the example server's own (``--http``/``--stdio``, ``--store``,
``--tokens``, ``--stateless``). The example server has no flags for its limits (finding
F-3 in /work/notes/security-findings.md), so the tests set them here through
``build_server(config=...)``, the server's public factory.
"""

from __future__ import annotations

import functools
import json
import sys

from mcp_tasks.examples import server as example
from mcp_tasks.runtime.engine import EngineConfig


def main(argv: list[str]) -> None:
    if len(argv) < 2 or argv[0] != "--engine-config":
        raise SystemExit("usage: config_server.py --engine-config JSON [example server args]")
    config = EngineConfig(**json.loads(argv[1]))
    example.build_server = functools.partial(example.build_server, config=config)  # type: ignore[assignment]
    example.main(argv[2:])


if __name__ == "__main__":
    main(sys.argv[1:])
