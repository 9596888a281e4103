"""The capability negotiator behind the generated ``capabilities`` module: hand-written, copied
verbatim. ``capabilities`` fills a ``Negotiator`` with the revision's tables (R-CAP-*, R-TOOL-*,
R-CREATE-4) and exports its methods as functions."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from ._handlers import dump

Side = Literal["client", "server"]
Capabilities = Mapping[str, Any] | BaseModel | None


def as_dict(capabilities: Capabilities) -> Mapping[str, Any]:
    """A capabilities object (or a tool) as wire JSON."""
    if capabilities is None:
        return {}
    if isinstance(capabilities, BaseModel):
        return dump(capabilities)
    return capabilities


@dataclass(frozen=True, slots=True)
class ToolTaskSupport:
    """The tool-level ``taskSupport`` rules (R-TOOL-*), from the rules overlay."""

    #: The request a tool's ``taskSupport`` governs (``tools/call``).
    method: str
    #: Where a tool declares it (``("execution", "taskSupport")``).
    path: tuple[str, ...]
    #: Every value the schema allows.
    values: tuple[str, ...]
    #: The value of a tool that declares none (R-TOOL-2).
    default: str
    #: Values under which a call may be task-augmented (R-TOOL-3).
    may: frozenset[str]
    #: Values under which a call must be task-augmented (R-TOOL-4).
    must: frozenset[str]
    #: The errors of an augmented call a tool forbids, and of a plain call it requires.
    forbidden: Callable[[str], Exception]
    required: Callable[[str], Exception]


@dataclass(frozen=True, slots=True)
class Negotiator:
    """Build our ``tasks`` capability, read the peer's, apply the ``taskSupport`` rules."""

    #: R-CAP-2, R-CAP-4: the request types each side may declare under ``tasks.requests``.
    requests: Mapping[Side, frozenset[str]]
    #: The other members of each side's ``tasks`` capability (``list``, ``cancel``).
    flags: Mapping[Side, frozenset[str]]
    models: Mapping[Side, type[BaseModel]]
    tool: ToolTaskSupport

    def build_tasks_capability(
        self,
        side: Side,
        *,
        requests: Iterable[str] | None = None,
        list: bool = True,
        cancel: bool = True,
    ) -> dict[str, Any]:
        """Our ``capabilities.tasks`` object (R-CAP-1, R-CAP-2).

        ``requests``: the task-augmentable methods to declare (default: all the
        revision allows for ``side``). ``list=False`` when tasks cannot be bound to a
        requestor (R-SEC-2).
        """
        allowed = self.requests.get(side, frozenset())
        chosen = sorted(allowed if requests is None else set(requests))
        unknown = [m for m in chosen if m not in allowed]
        if unknown:
            raise ValueError(
                f"{side} cannot declare task augmentation of {unknown}: allowed {sorted(allowed)}"
            )
        flags = self.flags.get(side, frozenset())
        wanted = {"list": list, "cancel": cancel}
        out: dict[str, Any] = {flag: {} for flag, on in wanted.items() if on and flag in flags}
        if chosen:
            tree: dict[str, Any] = {}
            for method in chosen:
                node = tree
                *parents, leaf = method.split("/")
                for part in parents:
                    node = node.setdefault(part, {})
                node[leaf] = {}
            out["requests"] = tree
        model = self.models.get(side)
        if model is not None:
            model.model_validate(out)
        return out

    def tasks_capability(self, capabilities: Capabilities) -> Mapping[str, Any] | None:
        """The peer's ``tasks`` capability, or None when it declared none (R-CAP-3)."""
        tasks = as_dict(capabilities).get("tasks")
        return tasks if isinstance(tasks, Mapping) else None

    def peer_supports(self, capabilities: Capabilities, method: str) -> bool:
        """May we task-augment ``method`` towards a peer with these capabilities? (R-CAP-3,
        R-CAP-4)."""
        tasks = self.tasks_capability(capabilities)
        if tasks is None:
            return False
        node: Any = tasks.get("requests")
        for part in method.split("/"):
            if not isinstance(node, Mapping) or part not in node:
                return False
            node = node[part]
        return node is not None and node is not False

    def peer_supports_list(self, capabilities: Capabilities) -> bool:
        tasks = self.tasks_capability(capabilities)
        return tasks is not None and tasks.get("list") is not None

    def peer_supports_cancel(self, capabilities: Capabilities) -> bool:
        tasks = self.tasks_capability(capabilities)
        return tasks is not None and tasks.get("cancel") is not None

    def tool_task_support(self, tool: Capabilities) -> str:
        """A tool's declared ``taskSupport`` (the overlay's default when absent: R-TOOL-2)."""
        node: Any = as_dict(tool)
        for part in self.tool.path:
            node = node.get(part) if isinstance(node, Mapping) else None
        if isinstance(node, str) and node in self.tool.values:
            return node
        return self.tool.default

    def may_call_tool_as_task(self, server_capabilities: Capabilities, tool: Capabilities) -> bool:
        """Requestor side: R-TOOL-1 (server capability first), then R-TOOL-2/3/4."""
        if not self.peer_supports(server_capabilities, self.tool.method):
            return False
        return self.tool_task_support(tool) in self.tool.may

    def must_call_tool_as_task(self, server_capabilities: Capabilities, tool: Capabilities) -> bool:
        """Requestor side: R-TOOL-4."""
        return (
            self.may_call_tool_as_task(server_capabilities, tool)
            and self.tool_task_support(tool) in self.tool.must
        )

    def check_tool_call(
        self, tool_name: str, task_support: str | None, *, augmented: bool, declared: bool = True
    ) -> bool:
        """Receiver side: does this tool call run as a task?

        ``declared``: we declared task augmentation of the tool method to this peer.
        Without it the ``task`` param is ignored and the call is handled normally
        (R-CREATE-4): such a peer may never task-augment (R-TOOL-1), so "required"
        cannot be held against it. Raises the overlay's error for a forbidden
        (R-TOOL-2) or a required (R-TOOL-4) augmentation.
        """
        if not declared:
            return False
        support = task_support or self.tool.default
        if augmented and support not in self.tool.may:
            raise self.tool.forbidden(tool_name)
        if not augmented and support in self.tool.must:
            raise self.tool.required(tool_name)
        return augmented
