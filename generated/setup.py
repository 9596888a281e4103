"""The version and requirements of mcptask-runtime, read from its package's descriptor
(``mcp_tasks/descriptor.py``, written by mcptask-gen): the version is the generator's that
wrote it (one version for both distributions), the requirements are the bindings' and each
extra a part's (``Part.extra``; ``all``: every part), with the pins of templates/needs.toml.

setuptools' scratch copy of the package (``build/lib``) is removed first: it is never emptied,
so a module deleted or moved since the last build would ride along in the wheel."""

from __future__ import annotations

import runpy
import shutil
from pathlib import Path

from setuptools import setup

here = Path(__file__).resolve().parent
shutil.rmtree(here / "build" / "lib", ignore_errors=True)
descriptor = runpy.run_path(str(here / "mcp_tasks" / "descriptor.py"))
parts = descriptor["PARTS"]
extras = {part.extra: list(part.requires) for part in parts.values() if part.extra is not None}
extras["all"] = sorted({line for lines in extras.values() for line in lines})

setup(
    version=descriptor["GENERATOR_VERSION"],
    install_requires=list(parts["bindings"].requires),
    extras_require=extras,
)
