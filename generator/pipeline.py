"""The pipeline: load -> select -> IR -> render -> format -> write (or check)."""

from __future__ import annotations

import keyword
from dataclasses import dataclass, replace
from pathlib import Path

from mcptask_gen import __version__, background, cache
from mcptask_gen import models as models_stage
from mcptask_gen.background import Background
from mcptask_gen.errors import GeneratorError
from mcptask_gen.extselect import select_extension
from mcptask_gen.fmt import format_sources
from mcptask_gen.ir import IR, Package, build_ir, merge_faces
from mcptask_gen.load import load, load_overlay, overlay_revisions
from mcptask_gen.render import Renderer, header
from mcptask_gen.reshape import reshape
from mcptask_gen.select import Selection, select
from mcptask_gen.write import MANIFEST_NAME, check, manifest_text, plan, publish


@dataclass(frozen=True)
class Options:
    schema: Path
    output: Path
    package_name: str | None = None
    revision: str | None = None
    templates: Path | None = None
    #: further schemas: each becomes one more face of the package
    more: tuple[Path, ...] = ()

    @property
    def schemas(self) -> tuple[Path, ...]:
        return (self.schema, *self.more)


_VALID_NAME = (
    "an import name: Python identifiers joined by dots, such as 'mcp_tasks' or "
    "'myapp.tasks_gen' (ASCII letters, digits and underscores, not starting with a digit, "
    "no keywords)"
)


def valid_package_name(name: str) -> bool:
    return name.isascii() and all(
        part.isidentifier() and not keyword.iskeyword(part) for part in name.split(".")
    )


def package_name_for(options: Options) -> str:
    if options.package_name is not None:
        if not valid_package_name(options.package_name):
            raise GeneratorError(
                f"--package-name {options.package_name!r} is not valid: give {_VALID_NAME}"
            )
        return options.package_name
    name = options.output.resolve().name
    if not valid_package_name(name) or "." in name:
        raise GeneratorError(
            f"the output directory's name {name!r} is not a Python package name; pass "
            f"--package-name with {_VALID_NAME}, or name the directory so"
        )
    return name


def analyse(schema: Path, revision: str | None, package: str) -> tuple[IR, Selection]:
    """load -> (reshape) -> select -> IR: what the templates see, and the selected definitions."""
    loaded = load(schema, revision)
    if loaded.overlay not in overlay_revisions():
        select(loaded)  # a schema without tasks says so first, naming where tasks went
    overlay = load_overlay(loaded.overlay, given=revision is not None, path=loaded.path)
    if overlay.reshape:
        loaded = replace(loaded, defs=reshape(loaded.defs), defs_key="$defs")
    if overlay.kind == "extension":
        selection = select_extension(loaded, overlay)
    else:
        selection = select(loaded, tuple(m.definition for m in overlay.meta if m.definition))
    return build_ir(loaded, selection, overlay, package, __version__), selection


def analyse_all(options: Options) -> tuple[Package, list[tuple[IR, Selection]]]:
    """Every schema's face, ordered by revision (argument order never matters)."""
    package = package_name_for(options)
    if options.revision is not None and options.more:
        raise GeneratorError("--revision names the revision of one schema; give one SCHEMA")
    faces = [analyse(s, options.revision, package) for s in options.schemas]
    merged = merge_faces([ir for ir, _ in faces])  # ordered and checked
    selections = {ir.face: sel for ir, sel in faces}
    return merged, [(ir, selections[ir.face]) for ir in merged.faces]


def _label(ir: IR) -> str:
    return f"{ir.revision} tasks extension" if ir.extension else ir.revision


def build(options: Options) -> tuple[list[IR], dict[str, str]]:
    """Everything up to the bytes of every output file; writes nothing."""
    merged, faces = analyse_all(options)
    renderer = Renderer(merged, options.templates)
    wanted = [(ir, sel.defs) for ir, sel in faces if any(f is ir for f, _ in renderer.models_templates)]
    codes: dict[str, str | None] = {
        ir.face: models_stage.cached(defs, _label(ir)) for ir, defs in wanted
    }
    # On a cache miss datamodel-code-generator (mostly its own import) runs in forked
    # children, one per face (the first started by the launcher, else now), while this
    # process renders and formats the templates: the chains of a cold run.
    misses = [(ir, defs) for ir, defs in wanted if codes[ir.face] is None]
    early = background.take()
    jobs: list[Background[str]] = []
    if early is not None and not misses:
        early.close()
        early = None
    try:
        for ir, defs in misses:
            job = early if early is not None else Background(models_stage.job)
            early = None
            jobs.append(job)
            job.send((defs, _label(ir), cache.enabled()))
        rendered = renderer.render_templates()
        files = format_sources(rendered.files, rendered.preformatted)
        for (ir, _), job in zip(misses, jobs, strict=True):
            codes[ir.face] = job.result()
        for ir, _ in wanted:
            files |= format_sources(renderer.render_models(ir, codes[ir.face] or ""))
    finally:
        for job in jobs:
            job.close()
    files[MANIFEST_NAME] = manifest_text(files, header(renderer.faces).splitlines()[0].lstrip("# "))
    return renderer.faces, files


def generate(options: Options) -> list[str]:
    _, files = build(options)
    p = plan(options.output, files)
    publish(p)
    return sorted(files)


def check_output(options: Options) -> tuple[bool, str]:
    _, files = build(options)
    if not options.output.is_dir():
        if options.output.exists():
            raise GeneratorError(f"output path exists and is not a directory: {options.output}")
        return False, "".join(f"missing: {rel}\n" for rel in sorted(files))
    return check(plan(options.output, files))
