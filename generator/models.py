"""The models stage: datamodel-code-generator over the selected closure (pydantic v2, Python
3.11), cached by content.

The tool's own options shape its output: standard collections, our module docstring as its
file header (``custom_file_header``, replace mode), isort as its formatter, and a template of
its own (``dmc_templates/``) that builds each model's validator on first use, not at import
(``defer_build``). Two leftovers of the tool are dropped: the alias of the empty root schema
(``Model``) and the ``typing.Dict`` its typed-extras annotation still uses (it ignores
``use_standard_collections`` there).
"""

from __future__ import annotations

import contextlib
import json
import re
import warnings
from importlib import resources
from pathlib import Path
from typing import Any

from mcptask_gen import cache
from mcptask_gen.errors import GeneratorError

OPTIONS: dict[str, Any] = {
    "use_annotated": True,
    "field_constraints": True,
    "use_standard_collections": True,
    "use_union_operator": True,
    "strict_nullable": True,
    "allow_population_by_field_name": True,
    "aliases": {"_meta": "meta"},
    "disable_timestamp": True,
    "use_schema_description": True,
    "use_double_quotes": True,
    "use_type_alias": True,
    "custom_file_header_mode": "replace",
}

#: Bump whenever the options or the leftovers below change: it is part of the cache key.
VERSION = "4"


def docstring(revision: str) -> str:
    """The models module's docstring (the tool writes it as its file header)."""
    return (
        f'"""Pydantic v2 models of the MCP {revision} task definitions and their transitive '
        "closure.\n\n"
        "Built by datamodel-code-generator from the schema; ``_meta`` is available as\n"
        "``meta`` (alias ``_meta``, population by name allowed). Serialize with\n"
        '``model.model_dump(mode="json", by_alias=True, exclude_unset=True)`` to get the\n'
        'wire JSON back exactly.\n"""\n'
    )


def _source(defs: dict[str, Any]) -> str:
    return json.dumps({"$schema": "https://json-schema.org/draft/2020-12/schema", "$defs": defs})


def _digest(source: str, header: str) -> str:
    from importlib.metadata import version

    return cache.key(
        f"datamodel-code-generator {version('datamodel-code-generator')} pydantic_v2 py311",
        f"models {VERSION}",
        repr(sorted(OPTIONS.items())),
        header,
        source,
    )


def cached(defs: dict[str, Any], revision: str) -> str | None:
    """The models module from the cache, or None (a miss, or the cache is off)."""
    if not cache.enabled():
        return None
    return cache.get("models", _digest(_source(defs), docstring(revision)))


def job(work: tuple[dict[str, Any], str, bool]) -> str:
    """``code`` for a forked worker: (definitions, revision, whether the cache is on). The
    flag travels with the input because ``--no-cache`` may be read after the worker was
    forked."""
    defs, revision, use_cache = work
    with contextlib.nullcontext() if use_cache else cache.off():
        return code(defs, revision)


def code(defs: dict[str, Any], revision: str) -> str:
    """The models module (docstring and imports included), from the cache when it holds it."""
    source, header = _source(defs), docstring(revision)
    digest = _digest(source, header) if cache.enabled() else ""
    hit = cache.get("models", digest) if digest else None
    if hit is not None:
        return hit
    out = _leftovers(_generate(source, header))
    if digest:
        cache.put("models", digest, out)
    return out


def _generate(source: str, header: str) -> str:
    from datamodel_code_generator import (
        DataModelType,
        Formatter,
        InputFileType,
        PythonVersion,
        generate,
    )

    templates = Path(str(resources.files("mcptask_gen").joinpath("dmc_templates")))
    try:
        with warnings.catch_warnings():  # isort "will become optional": we pin the tool
            warnings.simplefilter("ignore", FutureWarning)
            result = generate(
                source,
                input_file_type=InputFileType.JsonSchema,
                output_model_type=DataModelType.PydanticV2BaseModel,
                target_python_version=PythonVersion.PY_311,
                custom_file_header=header,
                custom_template_dir=templates,
                formatters=[Formatter.ISORT],
                **OPTIONS,
            )
    except GeneratorError:
        raise
    except Exception as exc:  # datamodel-code-generator raises many types
        detail = re.sub(r"\s*For further information visit \S+", "", str(exc))
        raise GeneratorError(
            f"datamodel-code-generator could not build the models: {detail}"
        ) from None
    if not isinstance(result, str):
        raise GeneratorError("datamodel-code-generator returned several modules; expected one")
    return result


def _leftovers(text: str) -> str:
    """Drop the empty root schema's alias and the typed-extras ``Dict`` (see the docstring)."""
    text = re.sub(r"\nModel = TypeAliasType\(\"Model\", Any\)\n", "\n", text)
    text = text.replace("Dict[str, Any]", "dict[str, Any]")
    return re.sub(
        r"^from typing import (.+)$",
        lambda m: "from typing import " + ", ".join(n for n in m[1].split(", ") if n != "Dict"),
        text,
        count=1,
        flags=re.MULTILINE,
    )
