"""PEP 517 backend: setuptools, plus a static import path in editable installs.

setuptools' default editable install maps ``mcptask_gen`` -> ``generator/`` with an import
hook. Python follows the hook; type checkers (mypy, pyright) do not, so ``mypy --strict`` on
code importing ``mcptask_gen`` failed with "Cannot find implementation or library stub".

``build_editable`` here builds setuptools' editable wheel unchanged (the hook stays, and keeps
every module and template current, new files included) and adds ``mcptask_gen-paths.pth``,
whose plain path line puts ``build/__editable_paths__/`` (holding a ``mcptask_gen`` symlink to
``generator/``) on ``sys.path``. mypy reads ``sys.path`` from the interpreter, so it resolves.
``mcptask_gen.templates`` and ``mcptask_gen.rules`` live elsewhere (``templates/``,
``schema/``) and are still found by the hook. The runtime's distribution (``generated/``) has
a plain layout, which setuptools' editable install already puts on ``sys.path`` as it is.
Wheels and sdists are setuptools' own, but for one thing: ``build_wheel`` first removes
setuptools' scratch copy (``build/lib``), which it never empties, so a module deleted or moved
since the last build cannot ride along in the wheel. The sdist carries this file
(``MANIFEST.in``).
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import zipfile
from pathlib import Path
from typing import Any

from setuptools import build_meta as _setuptools  # type: ignore[import-untyped]
from setuptools.build_meta import (  # type: ignore[import-untyped]  # noqa: F401
    build_sdist,
    get_requires_for_build_editable,
    get_requires_for_build_sdist,
    get_requires_for_build_wheel,
    prepare_metadata_for_build_editable,
    prepare_metadata_for_build_wheel,
)

PTH_NAME = "mcptask_gen-paths.pth"
LINKS = ("build", "__editable_paths__")


def _static_paths(root: Path) -> list[Path]:
    links = root.joinpath(*LINKS)
    links.mkdir(parents=True, exist_ok=True)
    link = links / "mcptask_gen"
    try:
        if link.is_symlink() or link.exists():
            link.unlink()
        os.symlink(root / "generator", link, target_is_directory=True)
    except OSError:  # no symlinks here: the import hook alone finds it
        return []
    return [links]


def _add_to_wheel(wheel: Path, name: str, data: bytes) -> None:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    with zipfile.ZipFile(wheel) as zf:
        record = next(n for n in zf.namelist() if n.endswith(".dist-info/RECORD"))
        record_text = zf.read(record).decode()
    with zipfile.ZipFile(wheel, "a", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(name, data)
    # RECORD is rewritten in a fresh archive: a zip cannot replace a member in place.
    tmp = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            if item.filename == record:
                continue
            dst.writestr(item, src.read(item.filename))
        dst.writestr(record, record_text + f"{name},sha256={digest},{len(data)}\n")
    tmp.replace(wheel)


def build_wheel(
    wheel_directory: str,
    config_settings: dict[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    shutil.rmtree(Path("build") / "lib", ignore_errors=True)
    name: str = _setuptools.build_wheel(wheel_directory, config_settings, metadata_directory)
    return name


def build_editable(
    wheel_directory: str,
    config_settings: dict[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    name: str = _setuptools.build_editable(wheel_directory, config_settings, metadata_directory)
    mode = (config_settings or {}).get("editable_mode") or (config_settings or {}).get(
        "editable-mode"
    )
    if mode in (None, "", "lenient"):  # strict and compat already give static paths
        paths = _static_paths(Path.cwd().resolve())
        if paths:
            lines = "".join(f"{p}\n" for p in paths)
            _add_to_wheel(Path(wheel_directory) / name, PTH_NAME, lines.encode())
    return name
