"""The pipeline: load -> select -> IR -> render -> format -> write (or check)."""

from __future__ import annotations

import keyword
from dataclasses import dataclass
from pathlib import Path

from mcptask_gen import __version__, background, cache
from mcptask_gen import models as models_stage
from mcptask_gen.background import Background
from mcptask_gen.errors import GeneratorError
from mcptask_gen.fmt import format_sources
from mcptask_gen.ir import IR, build_ir
from mcptask_gen.load import load, load_overlay, overlay_revisions
from mcptask_gen.render import Renderer, header
from mcptask_gen.select import Selection, select
from mcptask_gen.write import MANIFEST_NAME, check, manifest_text, plan, publish


@dataclass(frozen=True)
class Options:
    schema: Path
    output: Path
    package_name: str | None = None
    revision: str | None = None
    templates: Path | None = None


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
    """load -> select -> IR: what the templates see, and the selected definitions."""
    loaded = load(schema, revision)
    if loaded.revision not in overlay_revisions():
        select(loaded)  # a schema without tasks says so first, naming where tasks went
    overlay = load_overlay(loaded.revision, given=revision is not None, path=loaded.path)
    selection = select(loaded, tuple(m.definition for m in overlay.meta if m.definition))
    return build_ir(loaded, selection, overlay, package, __version__), selection


def build(options: Options) -> tuple[IR, dict[str, str]]:
    """Everything up to the bytes of every output file; writes nothing."""
    ir, selection = analyse(options.schema, options.revision, package_name_for(options))
    renderer = Renderer(ir, options.templates)
    defs = selection.defs
    models = models_stage.cached(defs, ir.revision) if renderer.models_template else ""
    # On a cache miss datamodel-code-generator (mostly its own import) runs in a forked child
    # (started by the launcher, else now) while this process renders and formats the
    # templates: the two chains of a cold run.
    early = background.take()
    if models is None and early is not None:
        job = early
    else:
        if early is not None:
            early.close()
        job = Background(models_stage.job, fork=None if models is None else False)
    with job:
        if models is None:
            job.send((defs, ir.revision, cache.enabled()))
        rendered = renderer.render_templates()
        files = format_sources(rendered.files, rendered.preformatted)
        if renderer.models_template:
            code = job.result() if models is None else models
            files |= format_sources(renderer.render_models(code))
    files[MANIFEST_NAME] = manifest_text(files, header(ir).splitlines()[0].lstrip("# "))
    return ir, files


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
