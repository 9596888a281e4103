"""The ``mcptask-gen`` console script: start the models worker first, then run the CLI.

datamodel-code-generator's import is the longest single step of a cold run, and it needs
nothing from the command line. When a run is likely to need it (no usable models cache),
a child is forked before even the CLI is imported; it imports datamodel-code-generator
while this process parses the options and selects the schema, then takes the selected
definitions (``pipeline.build``). Any other outcome (help, an error, a cache hit) kills it.
"""

from __future__ import annotations

import sys
from typing import Any

from mcptask_gen import background


def _import_models_generator() -> None:
    import datamodel_code_generator.config
    import datamodel_code_generator.model.pydantic_v2
    import datamodel_code_generator.parser.jsonschema  # noqa: F401
    import isort  # noqa: F401

    import mcptask_gen.models  # noqa: F401


def _models(work: tuple[dict[str, Any], str, bool]) -> str:
    from mcptask_gen.models import job

    return job(work)


def _worth_starting(argv: list[str]) -> bool:
    """A generation that will likely run datamodel-code-generator (fork is usable, the run
    is not --help/--version, and the models cache is off or empty)."""
    if not background.can_fork() or {"-h", "--help", "--version"} & set(argv):
        return False
    if "--no-cache" in argv:
        return True
    from mcptask_gen import cache

    root = cache.directory()
    if root is None:
        return True
    try:
        return not any((root / "models").iterdir())
    except OSError:
        return True


def main() -> None:
    if _worth_starting(sys.argv[1:]):
        background.adopt(background.Background(_models, prepare=_import_models_generator))
    try:
        from mcptask_gen.cli import main as cli_main

        cli_main()
    finally:
        background.discard()
