"""Import a package from a directory (a package the generator just wrote to a temporary
directory) without touching ``sys.path``.

The package is loaded from ``DIR/NAME/__init__.py`` with ``importlib``'s own machinery,
its ``__path__`` set to ``DIR/NAME``, so its submodules import through it, relative and
absolute imports alike, while nothing else can import from that directory by accident, and
no test leaves a path behind for the next one. :func:`unload` forgets it again.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType


def import_package(directory: Path, name: str) -> ModuleType:
    """The package ``name`` of ``directory`` (``directory/name/__init__.py``), imported."""
    if name in sys.modules:
        raise RuntimeError(f"a module named {name!r} is imported already: choose another name")
    root = Path(directory) / name
    spec = importlib.util.spec_from_file_location(
        name, root / "__init__.py", submodule_search_locations=[str(root)]
    )
    if spec is None or spec.loader is None:
        raise ImportError(f"no package {name!r} in {directory}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # as the import system does: submodules find their parent
    try:
        spec.loader.exec_module(module)
    except BaseException:
        unload(name)
        raise
    return module


def unload(name: str) -> None:
    """Forget the package ``name`` and its submodules (``sys.modules``)."""
    for key in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[key]


@contextmanager
def imported(directory: Path, name: str) -> Iterator[ModuleType]:
    """:func:`import_package` for the length of a ``with`` block."""
    module = import_package(directory, name)
    try:
        yield module
    finally:
        unload(name)
