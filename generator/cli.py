"""The ``mcptask-gen`` command."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from mcptask_gen import __version__, cache
from mcptask_gen.config import read_config
from mcptask_gen.errors import GeneratorError
from mcptask_gen.pipeline import Options, check_output, generate


@click.command(
    context_settings={"help_option_names": ["-h", "--help"]},
    help=(
        "Generate a typed Python package for MCP Tasks from the MCP JSON SCHEMA.\n\n"
        "Options may also be set in [tool.mcptask-gen] of ./pyproject.toml "
        "(keys: schema, output, package-name, revision, templates); flags win."
    ),
)
@click.argument("schema", required=False, type=click.Path(path_type=Path, dir_okay=True))
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Output package directory.")
@click.option(
    "--package-name", help="Import name of the package (default: the output directory's name)."
)
@click.option("--revision", help="MCP protocol revision of SCHEMA (inferred when absent).")
@click.option(
    "--templates",
    type=click.Path(path_type=Path, file_okay=False),
    help="Directory of templates overriding the built-in ones file by file.",
)
@click.option(
    "--check", "check_only", is_flag=True, help="Write nothing; exit 1 if the output would change."
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
@click.version_option(__version__, "--version", prog_name="mcptask-gen")
def main(
    schema: Path | None,
    output: Path | None,
    package_name: str | None,
    revision: str | None,
    templates: Path | None,
    check_only: bool,
    config_path: Path | None,
    no_cache: bool,
) -> None:
    if no_cache:
        cache.disable()
    try:
        config = read_config(config_path or Path("pyproject.toml"))
        schema = schema or config.get("schema")
        output = output or config.get("output")
        if schema is None:
            raise GeneratorError(
                "missing SCHEMA: give the MCP schema.json path (or schema in [tool.mcptask-gen])"
            )
        if output is None:
            raise GeneratorError(
                "missing -o/--output: give the output package directory (or output in [tool.mcptask-gen])"
            )
        options = Options(
            schema=schema,
            output=output,
            package_name=package_name or config.get("package-name"),
            revision=revision or config.get("revision"),
            templates=templates or config.get("templates"),
        )
        if check_only:
            ok, report = check_output(options)
            if ok:
                click.echo(f"{output}: up to date")
                sys.exit(0)
            click.echo(report, nl=False)
            click.echo(
                f"{output}: out of date; run mcptask-gen without --check to regenerate", err=True
            )
            sys.exit(1)
        written = generate(options)
        click.echo(f"wrote {len(written)} files to {output}")
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
