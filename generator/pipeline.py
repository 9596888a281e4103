"""The pipeline: one function per stage, in the order a schema walks through them.

1. ``load_schema``: read the schema, hash it, recognise its revision (``load``) and choose
   its rules overlay (``choose``: the revision's own, else one of the shape its task
   definitions have, found by ``detect``, or the user's ``--rules`` file); a schema with no
   tasks says so here, naming where its revision moved them;
2. ``reshape_schema``: an extension's schema, inlined copies back to named definitions
   (``reshape``), when its overlay asks for it;
3. ``select_tasks``: the task definitions found by structure and their closure (``select``,
   or ``extselect`` for an extension), once per schema;
4. ``face_ir``: what the templates see of that schema, its face (``ir.build_ir``);
5. ``ir.merge_faces``: every schema's face into one package, ordered and checked;
6. ``start_models``: datamodel-code-generator over each face's closure (``models``), from the
   cache or in forked children while the next two stages run;
7. ``render``: the templates (jinja2, ``render``), then each face's models module as its
   code arrives (``render_models``);
8. ``format_files``: black over what was rendered (``fmt``);
9. ``write_files`` or ``check_files``: stage and publish only files we own whose bytes
   change, or compare (``write``); either says what changed by model and method
   (``summary``).

``analyse`` is stages 1-4 for one schema, ``build`` 1-8 for every schema; ``generate`` and
``check_output`` (the command) add stage 9.
"""

from __future__ import annotations

import keyword
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType

from mcptask_gen import __version__, background, cache
from mcptask_gen import models as models_stage
from mcptask_gen.background import Background
from mcptask_gen.choose import UserRules, choose_rules, read_rules
from mcptask_gen.errors import GeneratorError
from mcptask_gen.extselect import select_extension
from mcptask_gen.fmt import format_sources
from mcptask_gen.installed import runtime_problem
from mcptask_gen.ir import IR, Package, build_ir, merge_faces
from mcptask_gen.load import LoadedSchema, load
from mcptask_gen.overlay import Overlay
from mcptask_gen.render import Rendered, Renderer
from mcptask_gen.reshape import reshape
from mcptask_gen.select import Selection, select
from mcptask_gen.stale import why_stale
from mcptask_gen.summary import changes, summarize
from mcptask_gen.write import MANIFEST_NAME, check, manifest_text, plan, publish

#: Where a warning goes: one line, said once (the command prints it on stderr).
Warn = Callable[[str], None]


class RulesWarning(UserWarning):
    """A schema generated with rules that are not its revision's own (``mcptask_gen.choose``)."""


def _warn(message: str) -> None:
    warnings.warn(message, RulesWarning, stacklevel=3)


@dataclass(frozen=True)
class Options:
    schema: Path
    output: Path
    package_name: str | None = None
    revision: str | None = None
    templates: Path | None = None
    #: further schemas: each becomes one more face of the package
    more: tuple[Path, ...] = ()
    #: the user's rules overlay file, for a schema whose revision mcptask-gen has none for
    rules: Path | None = None
    #: where warnings go (default: ``warnings.warn`` with ``RulesWarning``)
    warn: Warn | None = None
    #: vendor the default runtime (engine, stores, server, CLI, test kit) into the package
    with_runtime: bool = False
    #: per schema (``schemas``' order), the revision it is generated as (``--revision`` given
    #: once per schema); empty: ``revision`` for the one schema, else inferred
    revisions: tuple[str | None, ...] = ()
    #: per schema, the URL it was fetched from (None: a local file or a pinned copy)
    urls: tuple[str | None, ...] = ()

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


def load_schema(
    schema: Path, revision: str | None, rules: UserRules | None = None, warn: Warn | None = None
) -> tuple[LoadedSchema, Overlay]:
    """Stage 1: the schema and its rules overlay (``rules``). A schema whose revision has no
    overlay is first asked whether it has tasks at all (one scan), so that it says where they
    went; one with tasks is generated with its shape's overlay or the user's, ``warn``
    telling the user what that overlay supplied."""
    chosen = choose_rules(load(schema, revision), rules)
    if chosen.warning is not None:
        (warn or _warn)(chosen.warning)
    return chosen.loaded, chosen.overlay


def reshape_schema(loaded: LoadedSchema, overlay: Overlay) -> LoadedSchema:
    """Stage 2: the definitions reshaped (``overlay.reshape``), else ``loaded`` itself."""
    if not overlay.reshape:
        return loaded
    return replace(loaded, defs=reshape(loaded.defs), defs_key="$defs")


def select_tasks(loaded: LoadedSchema, overlay: Overlay) -> Selection:
    """Stage 3: the task definitions and their closure, as the overlay's kind finds them."""
    if overlay.kind == "extension":
        return select_extension(loaded, overlay)
    return select(loaded, tuple(m.definition for m in overlay.meta if m.definition))


def face_ir(
    loaded: LoadedSchema,
    selection: Selection,
    overlay: Overlay,
    package: str,
    url: str | None = None,
) -> IR:
    """Stage 4: the IR of one schema's face (``url``: where it was fetched from, if it was)."""
    return build_ir(loaded, selection, overlay, package, __version__, url)


def analyse(
    schema: Path,
    revision: str | None,
    package: str,
    rules: UserRules | None = None,
    warn: Warn | None = None,
    url: str | None = None,
) -> tuple[IR, Selection]:
    """Stages 1-4 of one schema: its face's IR and the selected definitions."""
    loaded, overlay = load_schema(schema, revision, rules, warn)
    loaded = reshape_schema(loaded, overlay)
    selection = select_tasks(loaded, overlay)
    return face_ir(loaded, selection, overlay, package, url), selection


def analyse_all(options: Options) -> tuple[Package, dict[str, Selection]]:
    """Stages 1-5: every schema's face merged into the package (argument order never
    matters), and each face's selected definitions by face name."""
    package = package_name_for(options)
    schemas = options.schemas
    if options.revisions:
        revisions = options.revisions
    elif options.revision is not None and options.more:
        raise GeneratorError("--revision names the revision of one schema; give one SCHEMA")
    else:
        revisions = (options.revision,) * len(schemas)
    urls = options.urls or (None,) * len(schemas)
    if len(revisions) != len(schemas) or len(urls) != len(schemas):
        raise GeneratorError("revisions and urls must name one entry per schema")
    rules = read_rules(options.rules) if options.rules is not None else None
    faces = [
        analyse(s, rev, package, rules, options.warn, url)
        for s, rev, url in zip(schemas, revisions, urls, strict=True)
    ]
    if rules is not None and not rules.used:
        named = ", ".join(ir.revision for ir, _ in faces)
        (options.warn or _warn)(
            f"--rules {rules.path} was not used: mcptask-gen has rules of its own for the "
            f"revision of every SCHEMA ({named})"
        )
    merged = merge_faces([ir for ir, _ in faces])  # ordered, one face per name
    return merged, {ir.face: selection for ir, selection in faces}


def _label(ir: IR) -> str:
    return f"{ir.revision} tasks extension" if ir.extension else ir.revision


class Models:
    """Stage 6 under way: each face's models module (datamodel-code-generator's code), from
    the cache, else from a forked child (the first started by the launcher, see
    ``launcher``) while this process renders and formats the templates: the two chains of a
    cold run. A context manager: leaving it kills a child no longer needed."""

    def __init__(self, wanted: list[tuple[IR, dict[str, object]]]) -> None:
        self.codes: dict[str, str | None] = {
            ir.face: models_stage.cached(defs, _label(ir)) for ir, defs in wanted
        }
        self.jobs: list[tuple[IR, Background[str]]] = []
        early = background.take()
        misses = [(ir, defs) for ir, defs in wanted if self.codes[ir.face] is None]
        if early is not None and not misses:
            early.close()
            early = None
        try:
            for ir, defs in misses:
                job = early if early is not None else Background(models_stage.job)
                early = None
                self.jobs.append((ir, job))
                job.send((defs, _label(ir), cache.enabled()))
        except BaseException:
            self.close()
            raise

    def wait(self) -> dict[str, str]:
        """Face name -> its models code, once every child has answered."""
        for ir, job in self.jobs:
            self.codes[ir.face] = job.result()
        return {face: code or "" for face, code in self.codes.items()}

    def close(self) -> None:
        for _, job in self.jobs:
            job.close()

    def __enter__(self) -> Models:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def start_models(renderer: Renderer, selections: dict[str, Selection]) -> Models:
    """Stage 6: the models of every face that has a models template, started."""
    return Models([(ir, selections[ir.face].defs) for ir, _ in renderer.models_templates])


def render(renderer: Renderer) -> Rendered:
    """Stage 7: every template but the models modules (they wait for stage 6)."""
    return renderer.render_templates()


def render_models(renderer: Renderer, codes: dict[str, str]) -> Rendered:
    """Stage 7, the rest: each face's ``models.py`` around its models code."""
    files: dict[str, str] = {}
    for ir, _ in renderer.models_templates:
        files |= renderer.render_models(ir, codes[ir.face])
    return Rendered(files=files, preformatted=set())


def format_files(rendered: Rendered) -> dict[str, str]:
    """Stage 8: black over every rendered Python module (the built-in hand-written ones,
    shipped formatted, are left as they are)."""
    return format_sources(rendered.files, rendered.preformatted)


def build(options: Options) -> tuple[list[IR], dict[str, str]]:
    """Stages 1-8: the faces and the bytes of every output file; writes nothing."""
    package, selections = analyse_all(options)
    renderer = Renderer(package, options.templates, options.with_runtime)
    with start_models(renderer, selections) as models:
        files = format_files(render(renderer))
        files |= format_files(render_models(renderer, models.wait()))
    files[MANIFEST_NAME] = manifest_text(files, f"mcptask-gen {__version__}")
    return list(package.faces), files


@dataclass(frozen=True)
class Written:
    """What stage 9 wrote: every file of the package, those whose bytes changed (only they
    are written), and what changed by model and method (``summary``; None for a package
    that did not exist)."""

    files: list[str]
    changed: list[str]
    summary: list[str] | None


def write_files(output: Path, files: dict[str, str]) -> Written:
    """Stage 9: stage the files that change, then publish them (only files we own are
    replaced; a file whose bytes stay is not touched)."""
    p = plan(output, files)
    found = changes(output, files, p.to_remove) if output.is_dir() else None
    publish(p)
    if found is None:
        return Written(sorted(files), sorted(files), None)
    return Written(sorted(files), [*found.changed, *found.new], summarize(found, files))


def check_files(output: Path, files: dict[str, str]) -> tuple[bool, str, list[str]]:
    """Stage 9 under ``--check``: (up to date, the diff of what would change, the summary
    by model and method)."""
    if not output.is_dir():
        if output.exists():
            raise GeneratorError(f"output path exists and is not a directory: {output}")
        return False, "", [f"files: {len(files)} new (the package is not there yet)"]
    p = plan(output, files)
    ok, report = check(p)
    return ok, report, [] if ok else summarize(changes(output, files, p.to_remove), files)


def generate(options: Options) -> Written:
    """Stages 1-9; then, for bindings without the runtime vendored, whether the runtime
    installed here serves them (a warning line when it cannot: ``installed``)."""
    faces, files = build(options)
    written = write_files(options.output, files)
    if not options.with_runtime:
        problem = runtime_problem(faces, faces[0].package, str(options.output))
        if problem is not None:
            (options.warn or _warn)(problem)
    return written


@dataclass(frozen=True)
class Checked:
    """What ``--check`` found: up to date or not, the summary by model and method, the
    unified diff, and why (one line per reason, ``stale``)."""

    ok: bool
    summary: list[str]
    diff: str
    reasons: list[str]


def check_output(options: Options) -> Checked:
    faces, files = build(options)
    ok, diff, summary = check_files(options.output, files)
    return Checked(ok, summary, diff, [] if ok else why_stale(options.output, faces))
