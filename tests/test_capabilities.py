"""The generated capability negotiator (R-CAP-*, R-TOOL-*, R-CREATE-4)."""

from __future__ import annotations

import pytest

from mcp_tasks.core.capabilities import (
    build_tasks_capability,
    check_tool_call,
    may_call_tool_as_task,
    must_call_tool_as_task,
    peer_supports,
    peer_supports_cancel,
    peer_supports_list,
    tool_task_support,
)
from mcp_tasks.errors import ToolTaskForbidden, ToolTaskRequired

SERVER = {"tasks": build_tasks_capability("server")}


def tool(support: str | None) -> dict[str, object]:
    return {"name": "t", "inputSchema": {"type": "object"}} | (
        {"execution": {"taskSupport": support}} if support else {}
    )


def test_build_capability_R_CAP_1_R_CAP_2() -> None:
    assert build_tasks_capability("server") == {
        "list": {},
        "cancel": {},
        "requests": {"tools": {"call": {}}},
    }
    assert build_tasks_capability("client", list=False) == {
        "cancel": {},
        "requests": {"elicitation": {"create": {}}, "sampling": {"createMessage": {}}},
    }
    with pytest.raises(ValueError, match="cannot declare"):
        build_tasks_capability("server", requests=["sampling/createMessage"])


def test_peer_capability_R_CAP_3_R_CAP_4() -> None:
    assert peer_supports(SERVER, "tools/call")
    assert not peer_supports(SERVER, "prompts/get")  # R-CAP-4: the listed set is exhaustive
    assert not peer_supports({}, "tools/call")  # R-CAP-3: no tasks capability, no tasks
    assert not peer_supports(None, "tools/call")
    assert peer_supports_list(SERVER) and peer_supports_cancel(SERVER)
    assert not peer_supports_list({"tasks": {"cancel": {}}})


def test_requestor_side_tool_rules_R_TOOL_1_to_4() -> None:
    assert tool_task_support(tool(None)) == "forbidden"  # R-TOOL-2 default
    assert not may_call_tool_as_task(SERVER, tool(None))
    assert may_call_tool_as_task(SERVER, tool("optional"))  # R-TOOL-3
    assert must_call_tool_as_task(SERVER, tool("required"))  # R-TOOL-4
    assert not may_call_tool_as_task({}, tool("required"))  # R-TOOL-1: capability first


def test_receiver_side_tool_rules_R_TOOL_2_R_TOOL_4_R_CREATE_4() -> None:
    with pytest.raises(ToolTaskForbidden) as forbidden:
        check_tool_call("greet", None, augmented=True)
    assert forbidden.value.code == -32601  # R-TOOL-2
    with pytest.raises(ToolTaskRequired) as required:
        check_tool_call("job", "required", augmented=False)
    assert required.value.code == -32601  # R-TOOL-4
    assert check_tool_call("slow", "optional", augmented=True) is True
    assert check_tool_call("slow", "optional", augmented=False) is False
    # R-CREATE-4: without a declared capability the task param is ignored and the call runs
    # normally; a peer that was never told about tasks cannot be refused for not using them.
    assert check_tool_call("greet", None, augmented=True, declared=False) is False
    assert check_tool_call("job", "required", augmented=False, declared=False) is False
