"""reshape: the pre-pass that gives a schema of inlined copies named, referenced definitions.

The tasks extension's schema (``ext-tasks`` ``schema/2026-07-28``) never ``$ref``s its own
definitions: it inlines ``Task``, ``TaskStatus`` and the five status variants wherever used, so
plain datamodel-code-generator numbers a third of its classes (``GetTaskResult1`` ...). Four
steps, each by structure and in name order (so ``$defs`` order and hash seeds never matter),
run before ``select`` for overlays that ask for them (``reshape = true``):

1. re-reference: a subschema equal (canonical JSON) to a named definition becomes a
   ``$ref`` to it;
2. hoist params: a request's or notification's inline ``params`` object (also inside
   ``allOf``) becomes ``<Definition>Params``, open (``additionalProperties``) and with a
   ``_meta`` (the per-request capability envelope, X-CAP-1) when the schema has ``MetaObject``;
3. flatten: ``allOf[{$ref Base}, {inline}]`` whose inline member re-declares a property of
   ``Base`` (the JSON-RPC envelope's ``params``) becomes one object (a subclass cannot
   narrow a field's type);
4. discriminate: an ``allOf`` with one member that is a union of variants told apart by a
   ``const`` property (``status``) is distributed over it (``GetTaskResultWorking`` ...) and
   becomes a union with a ``discriminator``; a bare such union gains the discriminator too.

Task-shaped objects (``taskId``, ``status``, ``createdAt``) and ``_meta`` types are made open
(X-TASK-2, X-CAP-1): JSON Schema allows the members they do not name, pydantic would drop them.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from mcptask_gen.errors import GeneratorError
from mcptask_gen.wellformed import check_shapes

#: Properties every task-shaped object has (its ``status`` is the enum or one ``const``).
TASK_SHAPE = frozenset({"taskId", "status", "createdAt"})
_STRUCTURAL = ("properties", "anyOf", "oneOf", "allOf", "enum")


#: Annotations: copies that differ only in these are still copies.
_ANNOTATIONS = frozenset({"$schema", "description", "title", "$comment", "examples"})


def _canon(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _canon(v) for k, v in sorted(node.items()) if k not in _ANNOTATIONS}
    if isinstance(node, list):
        return [_canon(v) for v in node]
    return node


def _key(node: Any) -> str:
    return json.dumps(_canon(node), sort_keys=True, separators=(",", ":"))


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/$defs/{name}"}


def _ref_name(node: Any) -> str | None:
    if isinstance(node, dict) and isinstance(node.get("$ref"), str):
        ref: str = node["$ref"]
        if ref.startswith("#/"):
            return ref.rsplit("/", 1)[-1]
    return None


def pascal(text: str) -> str:
    """``input_required`` -> ``InputRequired``."""
    return "".join(p[:1].upper() + p[1:] for p in re.split(r"[^0-9A-Za-z]+", text) if p)


def rereference(defs: dict[str, Any]) -> dict[str, Any]:
    """Step 1: inlined copies of named structural definitions become ``$ref``s (equal but
    for annotations; a copy equal to several definitions is left alone: no arbitrary pick)."""
    names: dict[str, list[str]] = {}
    for name in sorted(defs):
        node = defs[name]
        if isinstance(node, dict) and any(k in node for k in _STRUCTURAL):
            names.setdefault(_key(node), []).append(name)
    by_key = {key: found[0] for key, found in names.items() if len(found) == 1}

    def walk(node: Any, owner: str, root: bool) -> Any:
        if isinstance(node, dict):
            if not root and any(k in node for k in _STRUCTURAL):
                hit = by_key.get(_key(node))
                if hit is not None and hit != owner:
                    return _ref(hit)
            return {k: walk(v, owner, False) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v, owner, False) for v in node]
        return node

    return {name: walk(node, name, True) for name, node in defs.items()}


def _free(defs: dict[str, Any], name: str) -> str:
    while name in defs:
        name += "Inline"
    return name


def hoist_params(defs: dict[str, Any]) -> dict[str, Any]:
    """Step 2: inline ``params`` of method definitions become ``<Definition>Params``."""
    out = copy.deepcopy(defs)
    for name in sorted(defs):
        node = out[name]
        if not isinstance(node, dict):
            continue
        parts = [node] + [p for p in node.get("allOf") or () if isinstance(p, dict)]
        if not any(_method_const(p) for p in parts):
            continue
        for part in parts:
            props = part.get("properties")
            params = props.get("params") if isinstance(props, dict) else None
            if not isinstance(params, dict) or "$ref" in params:
                continue
            if not isinstance(params.get("properties"), dict) or not params["properties"]:
                continue
            assert isinstance(props, dict)  # params came from it
            new = _free(out, f"{name}Params")
            hoisted = dict(params)
            if "MetaObject" in out and "_meta" not in hoisted["properties"]:
                hoisted["properties"] = {"_meta": _ref("MetaObject"), **hoisted["properties"]}
            hoisted.setdefault("additionalProperties", {})
            out[new] = hoisted
            props["params"] = _ref(new)
    return out


def _method_const(node: Any) -> str | None:
    props = node.get("properties") if isinstance(node, dict) else None
    method = props.get("method") if isinstance(props, dict) else None
    const = method.get("const") if isinstance(method, dict) else None
    return const if isinstance(const, str) else None


def flatten(defs: dict[str, Any]) -> dict[str, Any]:
    """Step 3: ``allOf[{$ref Base}, {inline}]`` re-declaring a property of ``Base``: one object."""
    out = dict(defs)
    for name in sorted(defs):
        node = defs[name]
        parts = node.get("allOf") if isinstance(node, dict) else None
        if not isinstance(parts, list) or len(parts) != 2:
            continue
        base_name, own = _ref_name(parts[0]), parts[1]
        base = defs.get(base_name or "")
        if not isinstance(base, dict) or not isinstance(own, dict) or "$ref" in own:
            continue
        base_props, own_props = base.get("properties"), own.get("properties")
        if not isinstance(base_props, dict) or not isinstance(own_props, dict):
            continue
        if any(k in base for k in ("allOf", "anyOf", "oneOf")) or not set(base_props) & set(
            own_props
        ):
            continue
        required = [*(base.get("required") or ()), *(own.get("required") or ())]
        flat = {k: copy.deepcopy(v) for k, v in base.items() if k not in ("description", "title")}
        flat.update({k: v for k, v in node.items() if k in ("description", "title")})
        flat["type"] = "object"
        flat["properties"] = {**copy.deepcopy(base_props), **copy.deepcopy(own_props)}
        flat["required"] = sorted({str(r) for r in required if isinstance(r, str)})
        out[name] = flat
    return out


def variants(defs: dict[str, Any], node: Any) -> tuple[str, list[tuple[str, str]]] | None:
    """(discriminating property, [(value, variant definition)]) when ``node`` is (a ref to) a
    union of named variants told apart by one ``const`` property; else None."""
    target = defs.get(_ref_name(node) or "", node)
    members = target.get("anyOf") if isinstance(target, dict) else None
    if not isinstance(members, list) or len(members) < 2:
        return None
    names = [_ref_name(m) for m in members]
    bodies = [defs.get(n or "") for n in names]
    if not all(isinstance(b, dict) and isinstance(b.get("properties"), dict) for b in bodies):
        return None
    for prop in sorted(bodies[0]["properties"]):  # type: ignore[index]
        consts = [(b["properties"].get(prop) or {}).get("const") for b in bodies]  # type: ignore[index]
        if all(isinstance(c, str) for c in consts) and len(set(consts)) == len(consts):
            return prop, [(str(c), str(n)) for c, n in zip(consts, names, strict=True)]
    return None


def _discriminated(prop: str, pairs: list[tuple[str, str]]) -> dict[str, Any]:
    return {
        "anyOf": [_ref(v) for _, v in pairs],
        "discriminator": {"propertyName": prop, "mapping": {s: _ref(v)["$ref"] for s, v in pairs}},
    }


def discriminate(defs: dict[str, Any]) -> dict[str, Any]:
    """Step 4: distribute an ``allOf`` over its one discriminated-union member."""
    out = dict(defs)
    for name in sorted(defs):
        node = defs[name]
        if not isinstance(node, dict):
            continue
        own = variants(defs, node) if "anyOf" in node else None
        if own is not None:
            out[name] = {**node, **_discriminated(*own)}
            continue
        parts = node.get("allOf")
        if not isinstance(parts, list):
            continue
        found = [(i, v) for i, p in enumerate(parts) if (v := variants(defs, p)) is not None]
        if len(found) != 1:
            continue
        i, (prop, pairs) = found[0]
        named: list[tuple[str, str]] = []
        for value, variant in pairs:
            new = _free(out, name + pascal(value))
            out[new] = {"allOf": [*parts[:i], _ref(variant), *parts[i + 1 :]]}
            named.append((value, new))
        kept = {k: v for k, v in node.items() if k in ("description", "title")}
        out[name] = kept | _discriminated(prop, named)
    return out


def open_objects(defs: dict[str, Any]) -> dict[str, Any]:
    """Task-shaped objects (X-TASK-2) and the types of ``_meta`` members (open by JSON
    Schema's default; a request's capability envelope lives there, X-CAP-1) accept members
    they do not name: pydantic would drop them."""
    meta_types = set()
    for node in defs.values():
        props = node.get("properties") if isinstance(node, dict) else None
        target = _ref_name(props.get("_meta")) if isinstance(props, dict) else None
        if target is not None:
            meta_types.add(target)
    out = dict(defs)
    for name in sorted(defs):
        node = defs[name]
        props = node.get("properties") if isinstance(node, dict) else None
        is_task = isinstance(props, dict) and TASK_SHAPE <= set(props)
        is_meta = name in meta_types and isinstance(node, dict) and node.get("type") == "object"
        if is_task or is_meta:
            out[name] = {**node, "additionalProperties": node.get("additionalProperties", {})}
    return out


def reshape(defs: dict[str, Any]) -> dict[str, Any]:
    """The four steps over ``defs`` (not changed), ordered by name. Every definition must be
    well-formed first: the steps read them all."""
    for name in sorted(defs):
        check_shapes(defs[name], f"#/$defs/{name}")
    try:
        clean = {
            n: {k: v for k, v in d.items() if k != "$schema"} if isinstance(d, dict) else d
            for n, d in defs.items()
        }
        shaped = open_objects(discriminate(flatten(hoist_params(rereference(clean)))))
    except RecursionError:
        raise GeneratorError("schema is nested too deeply") from None
    return dict(sorted(shaped.items()))
