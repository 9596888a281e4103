"""The ``mcptask-gen`` command."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from mcptask_gen import __version__, cache
from mcptask_gen.config import read_config
from mcptask_gen.errors import GeneratorError
from mcptask_gen.fetch import resolve
from mcptask_gen.pipeline import Options, check_output, generate


def _list_template_context(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from mcptask_gen.context import describe

    click.echo(describe(), nl=False)
    ctx.exit(0)


def _warn(message: str) -> None:
    click.echo(f"mcptask-gen: warning: {message}", err=True)


def _options(
    config: dict[str, Any],
    schemas: tuple[str, ...],
    revisions: tuple[str, ...],
    published: bool,
    output: Path | None,
    **rest: Any,
) -> Options:
    """The run's options: its schemas (given, from the config, or the official ones of the
    revisions given), each resolved to a local file, and the rest as given."""
    if not revisions and config.get("revision") is not None:
        given_revisions = config["revision"]
        revisions = (
            tuple(given_revisions) if isinstance(given_revisions, list) else (given_revisions,)
        )
    given = config.get("schema")
    sources: list[str | Path] = list(schemas) or (
        list(given) if isinstance(given, list) else [given] if given is not None else []
    )
    if sources and len(revisions) > 1:
        raise GeneratorError(
            "--revision names the revision of one SCHEMA: give it once with a SCHEMA, or "
            "several times without one (each generates its official schema)"
        )
    if published and sources:
        raise GeneratorError(
            "--fetch fetches the official schema of --revision REV; it takes no SCHEMA "
            "(a URL given as SCHEMA is always fetched)"
        )
    if not sources and not revisions:
        resolve(None, None)  # says what is missing
    if output is None:
        raise GeneratorError(
            "missing -o/--output: give the output package directory (or output in [tool.mcptask-gen])"
        )
    if sources:
        resolved = [resolve(s, None, say=_warn) for s in sources]
        per_schema: tuple[str | None, ...] = ()
        revision = revisions[0] if revisions else None
    else:
        resolved = [resolve(None, r, published=published, say=_warn) for r in revisions]
        per_schema, revision = tuple(revisions), None
    return Options(
        schema=resolved[0].path,
        more=tuple(r.path for r in resolved[1:]),
        output=output,
        revision=revision,
        warn=_warn,
        revisions=per_schema,
        urls=tuple(r.url for r in resolved),
        **rest,
    )


@click.command(
    context_settings={"help_option_names": ["-h", "--help"]},
    help=(
        "Generate a typed Python package for MCP Tasks from the MCP JSON SCHEMA "
        "(a path or an http(s) URL); several schemas (such as 2025-11-25 and the tasks "
        "extension) become one package with one face subpackage each.\n\n"
        "Without SCHEMA, --revision REV generates from the official schema of REV that "
        "mcptask-gen ships (offline, the same bytes every time; --revision given twice makes "
        "a package of both faces: --revision 2025-11-25 --revision 2026-07-28-tasks); "
        "--fetch fetches the one published now instead.\n\n"
        "The package is the bindings: typed models, dispatch tables, handler bases, the "
        "capability negotiator, lifecycle, errors and the abstract TaskStore; it needs only "
        "pydantic and anyio. Serve it with the runtime, the distribution mcptask-runtime "
        "(mcp_tasks.runtime, with its mcp extra; the package's descriptor names the versions; "
        "not on PyPI yet: from a clone of the mcptask-gen repository, pip install "
        "'./generated[mcp]'), or vendor that runtime into it with --with-runtime.\n\n"
        "Options may also be set in [tool.mcptask-gen] of ./pyproject.toml "
        "(keys: schema, output, package-name, revision, templates, rules, with-runtime); flags win.\n\n"
        "A revision mcptask-gen does not know is generated when its task definitions have "
        "a known shape (the 2025-11-25 core protocol's or the 2026-07-28 tasks extension's), "
        "with that shape's rules overlay and one warning on stderr saying what to check; "
        "--rules gives your own overlay instead."
    ),
)
@click.argument("schemas", nargs=-1)
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Output package directory.")
@click.option(
    "--package-name", help="Import name of the package (default: the output directory's name)."
)
@click.option(
    "--revision",
    "revisions",
    multiple=True,
    help=(
        "MCP protocol revision of SCHEMA (inferred when absent); without SCHEMA, generate "
        "from the official schema of this revision shipped with mcptask-gen (2025-11-25, "
        "2026-07-28-tasks for the tasks extension); give it twice for both faces."
    ),
)
@click.option(
    "--fetch",
    "published",
    is_flag=True,
    help=(
        "With --revision and no SCHEMA: fetch the revision's official schema as published "
        "now (network) instead of the copy mcptask-gen ships."
    ),
)
@click.option(
    "--templates",
    type=click.Path(path_type=Path, file_okay=False),
    help="Directory of templates overriding the built-in ones file by file.",
)
@click.option(
    "--rules",
    type=click.Path(path_type=Path, dir_okay=False),
    help=(
        "Rules overlay (TOML) for a SCHEMA whose revision mcptask-gen has none for: what the "
        "JSON schema cannot say. Top level: revision, face, kind ('core' or 'extension'), "
        "reshape; tables [lifecycle] (initial, terminal, transitions, the status roles), "
        "[[errors]] (name, code, message, base, rule, data), [[meta]] (key, name, def, type, "
        "rule, task_id_field), [tool_task_support], [roles], and for kind 'extension' "
        "[extension]. Start from a shipped one (mcptask_gen.rules: 2025-11-25.toml, "
        "2026-07-28-tasks.toml); the format: docs/generator.md, 'Rules overlays'."
    ),
)
@click.option(
    "--with-runtime",
    is_flag=True,
    default=None,
    help=(
        "Also copy the default runtime (engine, stores, MCP server, CLI, test kit) into the "
        "package, for a self-contained package; its parts and their requirements are listed "
        "in the package's descriptor module."
    ),
)
@click.option(
    "--check",
    "check_only",
    is_flag=True,
    help=(
        "Write nothing; exit 1 if the output would change, saying what would change by model "
        "and method, and why (--diff: the whole diff too)."
    ),
)
@click.option(
    "--diff",
    "show_diff",
    is_flag=True,
    help="With --check: print the unified diff of every file that would change.",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="pyproject.toml to read [tool.mcptask-gen] from (default: ./pyproject.toml).",
)
@click.option(
    "--no-cache",
    is_flag=True,
    help="Do not read or write the formatting/model cache (~/.cache/mcptask-gen).",
)
@click.option(
    "--list-template-context",
    is_flag=True,
    is_eager=True,
    expose_value=False,
    callback=_list_template_context,
    help="Print every name a --templates template can use, and exit.",
)
@click.version_option(__version__, "--version", prog_name="mcptask-gen")
def main(
    schemas: tuple[str, ...],
    output: Path | None,
    package_name: str | None,
    revisions: tuple[str, ...],
    published: bool,
    templates: Path | None,
    rules: Path | None,
    with_runtime: bool | None,
    check_only: bool,
    show_diff: bool,
    config_path: Path | None,
    no_cache: bool,
) -> None:
    if no_cache:  # for this run only: the context's close turns the cache back on
        click.get_current_context().with_resource(cache.off())
    try:
        config = read_config(config_path or Path("pyproject.toml"))
        output = output or config.get("output")
        options = _options(
            config,
            schemas,
            revisions,
            published,
            output,
            package_name=package_name or config.get("package-name"),
            templates=templates or config.get("templates"),
            rules=rules or config.get("rules"),
            with_runtime=bool(
                with_runtime if with_runtime is not None else config.get("with-runtime")
            ),
        )
        if check_only:
            checked = check_output(options)
            if checked.ok:
                click.echo(f"{output}: up to date")
                sys.exit(0)
            for line in checked.summary:  # what would change, by model and method
                click.echo(line)
            if show_diff:
                click.echo(checked.diff, nl=False)
            click.echo(f"{output}: out of date:", err=True)
            for reason in checked.reasons:
                click.echo(f"  {reason}", err=True)
            more = "" if show_diff else " (--diff shows the diff)"
            click.echo(f"run mcptask-gen without --check to regenerate{more}", err=True)
            sys.exit(1)
        written = generate(options)
        for line in written.summary or ():  # what changed, by model and method
            click.echo(line)
        if written.summary is None:
            click.echo(f"wrote {len(written.files)} files to {output}")
        else:
            kept = len(written.files) - len(written.changed)
            click.echo(
                f"wrote {len(written.changed)} of {len(written.files)} files to {output}"
                f" ({kept} unchanged)"
            )
    except GeneratorError as exc:
        click.echo(f"mcptask-gen: error: {exc}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        click.echo("mcptask-gen: interrupted; nothing was published", err=True)
        sys.exit(2)
    except RecursionError:
        click.echo("mcptask-gen: error: schema is nested too deeply", err=True)
        sys.exit(2)
    except MemoryError:
        click.echo("mcptask-gen: error: out of memory reading the schema", err=True)
        sys.exit(2)
