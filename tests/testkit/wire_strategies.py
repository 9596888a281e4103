"""Hypothesis strategies for the wire fuzzer: valid ``tasks/*`` and task-augmented
``tools/call`` messages built from our own generated pydantic models (their JSON
schema), and mutations of them.

A drawn case is a :class:`Case`: the bytes to send, the request id (``None`` for
a notification or for bytes that are no valid JSON-RPC request) and what kind
of mutation produced it.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st
from pydantic import BaseModel

from mcp_tasks.core import models
from mcp_tasks.extension import protocol as ext_protocol
from testkit.json_tree import drop_at, json_paths, set_at

#: the example server's tools and arguments that answer at once when not run as a task
QUICK_TOOLS: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "greet": st.fixed_dictionaries({"name": st.text(max_size=20)}),
    "slow_compute": st.fixed_dictionaries(
        {"seconds": st.sampled_from([0, 0.01])},
        optional={"label": st.text(max_size=20)},
    ),
}
#: tools run only as tasks (they may wait for input or for a long time)
TASK_TOOLS: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    **QUICK_TOOLS,
    "failing_job": st.just({}),
    "protocol_error_job": st.just({}),
    "confirm_delete": st.fixed_dictionaries({"path": st.text(max_size=30)}),
}

REQUEST_MODELS: list[type[BaseModel]] = [
    models.GetTaskRequest,
    models.GetTaskPayloadRequest,
    models.CancelTaskRequest,
    models.ListTasksRequest,
]
UNKNOWN_METHODS = [
    "tasks/delete",
    "tasks/update",
    "tasks/",
    "TASKS/GET",
    "tasks/get/",
    "rpc.discover",
    "notifications/tasks/status",
    "",
    "x" * 300,
    "\u202etasks/get",
]


def _strategy(
    schema: dict[str, Any], defs: dict[str, Any], depth: int = 0
) -> st.SearchStrategy[Any]:
    """A strategy of JSON values valid against a (pydantic-emitted) JSON schema."""
    if "$ref" in schema:
        return _strategy(defs[schema["$ref"].rsplit("/", 1)[-1]], defs, depth)
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "anyOf" in schema:
        return st.one_of([_strategy(s, defs, depth) for s in schema["anyOf"]])
    kind = schema.get("type")
    if kind == "string":
        return st.text(max_size=40)
    if kind == "integer":
        lo = schema.get("minimum", schema.get("exclusiveMinimum", -(2**40)))
        return st.integers(min_value=lo, max_value=2**40)
    if kind == "number":
        return st.floats(allow_nan=False, allow_infinity=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        return st.lists(_strategy(schema.get("items", {}), defs, depth + 1), max_size=3)
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        required = set(schema.get("required", ()))
        req = {k: _strategy(v, defs, depth + 1) for k, v in props.items() if k in required}
        opt = {k: _strategy(v, defs, depth + 1) for k, v in props.items() if k not in required}
        return st.fixed_dictionaries(req, optional=opt)
    return json_values(depth)


def json_values(depth: int = 0) -> st.SearchStrategy[Any]:
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=30),
    )
    if depth > 2:
        return scalars
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=10), inner, max_size=3)
        ),
        max_leaves=8,
    )


def model_messages(model: type[BaseModel]) -> st.SearchStrategy[dict[str, Any]]:
    schema = model.model_json_schema()
    return _strategy(schema, schema.get("$defs", {}))


@st.composite
def valid_messages(draw: st.DrawFn, known_ids: list[str]) -> dict[str, Any]:
    """A valid request: ``tasks/*`` from the generated request models, or a
    ``tools/call`` with ``task`` (``TaskAugmentedRequestParams``)."""
    if draw(st.integers(0, 3)) == 0:
        tool = draw(st.sampled_from(sorted(TASK_TOOLS)))
        task_schema = models.TaskMetadata.model_json_schema()
        task = draw(_strategy(task_schema, task_schema.get("$defs", {})))
        params: dict[str, Any] = {"name": tool, "arguments": draw(TASK_TOOLS[tool]), "task": task}
        models.TaskAugmentedRequestParams.model_validate(params)
        return {"jsonrpc": "2.0", "id": 0, "method": "tools/call", "params": params}
    model = draw(st.sampled_from(REQUEST_MODELS))
    msg = draw(model_messages(model))
    sent = msg.get("params")
    if known_ids and isinstance(sent, dict) and "taskId" in sent and draw(st.booleans()):
        sent["taskId"] = draw(st.sampled_from(known_ids))  # a real (finished) task
    model.model_validate(msg)  # the strategy really is valid against our model
    return msg


@dataclass
class Case:
    kind: str
    body: bytes
    request_id: int | str | None  # the id a response must carry; None: no answer expected by id
    notification: bool = False
    well_formed: bool = True  # valid JSON and a JSON-RPC envelope the id can be read from
    sent_id: Any = None  # the id in the bytes, if any (an error may echo it)
    headers: dict[str, str] | None = None  # HTTP headers of its own (the extension's face)

    def __repr__(self) -> str:
        body = (
            self.body
            if len(self.body) <= 300
            else self.body[:300] + b"...(%d bytes)" % len(self.body)
        )
        return f"Case({self.kind!r}, {body!r}, id={self.request_id!r})"


DEEP = "__deep_placeholder__"


def _deep_text(depth: int) -> str:
    """``depth`` levels of alternating arrays and objects, as JSON text (no recursion)."""
    opens = "".join('{"n":' if i % 2 else "[" for i in range(depth))
    closes = "".join("}" if i % 2 else "]" for i in reversed(range(depth)))
    return opens + '"bottom"' + closes


def _params_paths(msg: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [p for p in json_paths(msg) if p and p[0] == "params"]


Message = dict[str, Any]
#: A mutation of a valid message: the message to send (encoded by :func:`cases`), or a
#: :class:`Case` of its own when the bytes are no longer a request answered by its id.
Mutation = Callable[[st.DrawFn, Message, int], "Message | Case"]


def _valid(draw: st.DrawFn, msg: Message, request_id: int) -> Message | Case:
    return msg


def _wrong_type(draw: st.DrawFn, msg: Message, request_id: int) -> Message | Case:
    paths = _params_paths(msg) or [("params",)]
    path = draw(st.sampled_from(paths))
    msg.setdefault("params", {})
    return set_at(msg, path, draw(st.sampled_from([None, 0, -1, 1.5, True, "x", [], [1], {}])))


def _missing_field(draw: st.DrawFn, msg: Message, request_id: int) -> Message | Case:
    path = draw(st.sampled_from([("method",), ("jsonrpc",), *_params_paths(msg)]))
    msg = drop_at(msg, path)
    if path in (("method",), ("jsonrpc",)):
        # no longer a request: an error with id null (or this id) is the answer
        body = json.dumps(msg).encode()
        return Case("missing_field", body, None, well_formed=False, sent_id=request_id)
    return msg


def _ttl(draw: st.DrawFn, msg: Message, request_id: int) -> Message | Case:
    ttl = draw(
        st.one_of(
            st.sampled_from([-1, -(2**63), 2**63, 10**30, 0, 1, 1e308, -0.0, 2.5, "60000", None]),
            st.integers(),
        )
    )
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "slow_compute", "arguments": {"seconds": 0}, "task": {"ttl": ttl}},
    }


def _megabyte_string(draw: st.DrawFn, msg: Message, request_id: int) -> Message | Case:
    big = draw(st.sampled_from(["a", "\u00e9", "\U0001f600", "\x00"])) * (1 << 20)
    paths = [p for p in _params_paths(msg) if len(p) > 1]
    path = draw(st.sampled_from(paths)) if paths else ("params", "taskId")
    msg.setdefault("params", {})
    return set_at(msg, path, big) if paths else {**msg, "params": {"taskId": big}}


def _unicode(draw: st.DrawFn, msg: Message, request_id: int) -> Message | Case:
    text = draw(st.text(min_size=1, max_size=50))
    paths = [p for p in _params_paths(msg) if len(p) > 1] or [("params",)]
    return set_at(msg, draw(st.sampled_from(paths)), text)


def _deep_nesting(draw: st.DrawFn, msg: Message, request_id: int) -> Message | Case:
    depth = draw(st.sampled_from([50, 500, 5000, 50000]))
    params = msg.setdefault("params", {})
    if isinstance(params, dict):
        params["_meta"] = {"deep": DEEP}
    text = json.dumps(msg).replace(json.dumps(DEEP), _deep_text(depth))
    return Case("deep_nesting", text.encode(), request_id)


def _unknown_method(draw: st.DrawFn, msg: Message, request_id: int) -> Message | Case:
    msg["method"] = draw(st.sampled_from(UNKNOWN_METHODS))
    if msg["method"] == "notifications/tasks/status":
        msg.pop("id")  # a notification of the client: silence
    return msg


def _unknown_meta(draw: st.DrawFn, msg: Message, request_id: int) -> Message | Case:
    params = msg.setdefault("params", {})
    if isinstance(params, dict):
        params["_meta"] = draw(
            st.dictionaries(st.text(max_size=40), json_values(), min_size=1, max_size=4)
        )
        if draw(st.booleans()):
            params["_meta"]["io.modelcontextprotocol/related-task"] = draw(json_values())
    return msg


def _notification(draw: st.DrawFn, msg: Message, request_id: int) -> Message | Case:
    msg.pop("id")
    msg["method"] = draw(
        st.sampled_from(
            [
                msg["method"],
                "notifications/cancelled",
                "notifications/progress",
                "notifications/tasks/status",
                "notifications/whatever",
            ]
        )
    )
    return Case("notification", json.dumps(msg).encode(), None, notification=True)


def _bad_json(draw: st.DrawFn, msg: Message, request_id: int) -> Message | Case:
    text = json.dumps(msg)
    body = draw(
        st.sampled_from(
            [
                text[: max(1, len(text) // 2)].encode(),
                text.encode() + b"}",
                b"\xff\xfe" + text.encode(),
                text.replace('"', "'").encode(),
                b"",
                b"null",
                b"[]",
                b"{}",
                b'"just a string"',
                b"NaN",
                text.encode().replace(b"2.0", b"\x00"),
            ]
        )
    )
    return Case("bad_json", body, None, well_formed=False)


def _bad_envelope(draw: st.DrawFn, msg: Message, request_id: int) -> Message | Case:
    variant = draw(st.integers(0, 5))
    sent: Any = msg
    if variant == 0:
        msg["jsonrpc"] = draw(st.sampled_from(["1.0", "3.0", 2.0, None]))
    elif variant == 1:
        # not a valid id: the SDK reads such a message as a notification (F-5)
        msg["id"] = draw(st.sampled_from([None, 1.5, True, {"a": 1}, [1]]))
        return Case("bad_envelope", json.dumps(msg).encode(), None, well_formed=False)
    elif variant == 2:
        msg["params"] = draw(st.sampled_from([[1, 2], "x", 7, True]))
    elif variant == 3:
        sent = [msg]  # batches are gone in 2025-06-18+
    elif variant == 4:
        msg["method"] = draw(st.sampled_from([None, 7, ["tasks/get"], {}]))
    else:
        msg["result"] = {}
    body = json.dumps(sent).encode()
    return Case("bad_envelope", body, None, well_formed=False, sent_id=request_id)


def _tool_arguments(draw: st.DrawFn, msg: Message, request_id: int) -> Message | Case:
    tool = draw(st.sampled_from(sorted(TASK_TOOLS)))
    args = draw(st.one_of(json_values(), st.dictionaries(st.text(max_size=10), json_values())))
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": tool, "arguments": args, "task": {}},
    }


#: Every kind of case, drawn in this order by :func:`cases`, and how it is made.
MUTATORS: dict[str, Mutation] = {
    "valid": _valid,
    "wrong_type": _wrong_type,
    "missing_field": _missing_field,
    "ttl": _ttl,
    "megabyte_string": _megabyte_string,
    "unicode": _unicode,
    "deep_nesting": _deep_nesting,
    "unknown_method": _unknown_method,
    "unknown_meta": _unknown_meta,
    "notification": _notification,
    "bad_json": _bad_json,
    "bad_envelope": _bad_envelope,
    "tool_arguments": _tool_arguments,
}
MUTATIONS = list(MUTATORS)


@st.composite
def cases(draw: st.DrawFn, known_ids: list[str], request_id: int) -> Case:
    msg = draw(valid_messages(known_ids))
    msg["id"] = request_id
    kind = draw(st.sampled_from(MUTATIONS))
    mutated = MUTATORS[kind](draw, msg, request_id)
    if isinstance(mutated, Case):
        return mutated
    # the id a response must carry: none once the mutation made it a notification
    rid: int | None = request_id if "id" in mutated else None
    params = mutated.get("params")
    if isinstance(params, dict) and params.get("name") == "confirm_delete":
        if not isinstance(params.get("task"), dict):
            params["name"] = "greet"  # run inline it would (rightly) wait for the user's answer
    return Case(kind, json.dumps(mutated, ensure_ascii=draw(st.booleans())).encode(), rid)


# --------------------------------------------------------------------------- the extension's face
#: The tasks extension (2026-07-28): stateless requests, the capability envelope in
#: ``params._meta``, routing headers (X-HTTP-1). Facts from the generated face.
EXT_REVISION = ext_protocol.REVISION
EXT_ID = ext_protocol.EXTENSION_ID
ENVELOPE = "io.modelcontextprotocol/"
EXT_METHODS = ext_protocol.TASK_REQUEST_METHODS
EXT_UNKNOWN_METHODS = ["tasks/result", "tasks/list", "tasks/frobnicate", "TASKS/UPDATE", ""]
EXT_MUTATIONS = [
    "valid",
    "wrong_type",
    "missing_field",
    "megabyte_string",
    "unicode",
    "unknown_method",
    "bad_envelope_meta",
    "huge_input_responses",
    "header_mismatch",
]


def ext_envelope(declared: bool) -> dict[str, Any]:
    caps: dict[str, Any] = {"extensions": {EXT_ID: {}}} if declared else {}
    return {
        f"{ENVELOPE}protocolVersion": EXT_REVISION,
        f"{ENVELOPE}clientInfo": {"name": "fuzz", "version": "0"},
        f"{ENVELOPE}clientCapabilities": caps,
    }


def _header_value(value: str) -> str:
    """A routing header value as the SDK reads it: plain ASCII, else ``=?base64?...?=``."""
    if value.isascii() and value.isprintable() and value == value.strip():
        return value
    return "=?base64?" + base64.b64encode(value.encode("utf-8", "surrogatepass")).decode() + "?="


def ext_headers(msg: Any) -> dict[str, str]:
    """``MCP-Protocol-Version``, ``Mcp-Method`` and ``Mcp-Name`` for a message (X-HTTP-1)."""
    head = {"MCP-Protocol-Version": EXT_REVISION}
    if not isinstance(msg, dict):
        return head
    method = msg.get("method")
    if isinstance(method, str) and method.isascii() and method.isprintable() and method:
        head["Mcp-Method"] = method
    params = msg.get("params")
    if isinstance(params, dict):
        for key in ("name", ext_protocol.ROUTING_NAME_PARAM):
            value = params.get(key)
            if isinstance(value, str) and len(value) < 1000:
                head["Mcp-Name"] = _header_value(value)
    return head


@st.composite
def ext_valid_messages(draw: st.DrawFn, known_ids: list[str]) -> dict[str, Any]:
    """A well-formed request of the extension's face: a quick ``tools/call`` or a
    ``tasks/get|update|cancel`` (with or without the capability declared)."""
    params: dict[str, Any]
    if draw(st.integers(0, 3)) == 0:
        method = ext_protocol.TOOLS_CALL
        tool = draw(st.sampled_from(sorted(QUICK_TOOLS)))
        params = {"name": tool, "arguments": draw(QUICK_TOOLS[tool])}
    else:
        method = draw(st.sampled_from(EXT_METHODS))
        known: bool = draw(st.booleans())
        if known_ids and known:
            task_id = draw(st.sampled_from(known_ids))
        else:
            task_id = draw(st.text(max_size=40))
        params = {"taskId": task_id}
        if method == ext_protocol.TASKS_UPDATE:
            params["inputResponses"] = draw(
                st.dictionaries(st.text(max_size=10), json_values(), max_size=3)
            )
    params["_meta"] = ext_envelope(draw(st.booleans()))
    return {"jsonrpc": "2.0", "id": 0, "method": method, "params": params}


@st.composite
def ext_cases(draw: st.DrawFn, known_ids: list[str], request_id: int) -> Case:
    """A case on the extension's face; ``Case.headers`` are its routing headers."""
    msg = draw(ext_valid_messages(known_ids))
    msg["id"] = request_id
    kind = draw(st.sampled_from(EXT_MUTATIONS))
    params = msg["params"]
    if kind == "wrong_type":
        paths = [p for p in _params_paths(msg) if len(p) > 1]
        msg = set_at(msg, draw(st.sampled_from(paths)), draw(st.sampled_from([None, 0, [], {}])))
    elif kind == "missing_field":
        msg = drop_at(msg, draw(st.sampled_from([p for p in _params_paths(msg) if len(p) == 2])))
    elif kind == "megabyte_string":
        big = draw(st.sampled_from(["a", "\u00e9", "\x00"])) * (1 << 20)
        key = "name" if "name" in params else ext_protocol.ROUTING_NAME_PARAM
        params[key] = big
    elif kind == "unicode":
        key = "name" if "name" in params else ext_protocol.ROUTING_NAME_PARAM
        params[key] = draw(st.text(min_size=1, max_size=50))
    elif kind == "unknown_method":
        msg["method"] = draw(st.sampled_from(EXT_UNKNOWN_METHODS))
    elif kind == "bad_envelope_meta":
        meta = params["_meta"]
        caps_key = f"{ENVELOPE}clientCapabilities"
        choice = draw(st.integers(0, 4))
        if choice == 0:
            del params["_meta"]
        elif choice == 1:
            meta[caps_key] = draw(json_values())
        elif choice == 2:
            meta[caps_key] = {"extensions": draw(json_values())}
        elif choice == 3:
            meta[caps_key] = {"extensions": {EXT_ID: draw(json_values())}}
        else:
            params["_meta"] = draw(json_values())
    elif kind == "huge_input_responses":
        msg["method"] = ext_protocol.TASKS_UPDATE
        params.setdefault(ext_protocol.ROUTING_NAME_PARAM, draw(st.text(max_size=20)))
        params["inputResponses"] = {f"k{i}": {"action": "accept"} for i in range(5000)}
    headers = ext_headers(msg)
    if kind == "header_mismatch":
        which = draw(st.sampled_from(["Mcp-Name", "Mcp-Method"]))
        headers[which] = draw(st.sampled_from(["other", "tasks/get", "tools/call", "x" * 200]))
    return Case(kind, json.dumps(msg).encode(), request_id, headers=headers)
