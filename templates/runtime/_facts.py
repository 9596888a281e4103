"""Temporary: protocol facts until ``mcp_tasks.protocol`` is merged (then removed)."""

from __future__ import annotations

from typing import Final, Literal

REVISION = "2025-11-25"
WORKING = "working"
INPUT_REQUIRED = "input_required"
TERMINAL = frozenset({"completed", "failed", "cancelled"})
TASKS_GET = "tasks/get"
TASKS_RESULT = "tasks/result"
TASKS_LIST = "tasks/list"
TASKS_CANCEL = "tasks/cancel"
NOTIFICATIONS_TASKS_STATUS = "notifications/tasks/status"
TOOLS_CALL = "tools/call"
SAMPLING_CREATE_MESSAGE = "sampling/createMessage"
ELICITATION_CREATE = "elicitation/create"
TASK_REQUEST_METHODS = (TASKS_GET, TASKS_RESULT, TASKS_LIST, TASKS_CANCEL)
AUGMENTABLE = {
    "server": frozenset({TOOLS_CALL}),
    "client": frozenset({SAMPLING_CREATE_MESSAGE, ELICITATION_CREATE}),
}
SERVER_REQUEST_METHODS = frozenset(
    {"ping", "roots/list", SAMPLING_CREATE_MESSAGE, ELICITATION_CREATE, *TASK_REQUEST_METHODS}
)
TaskSupportValue = Literal["forbidden", "optional", "required"]
TASK_SUPPORT_FORBIDDEN: Final = "forbidden"
TASK_SUPPORT_OPTIONAL: Final = "optional"
TASK_SUPPORT_REQUIRED: Final = "required"
TASK_SUPPORT_VALUES = ("forbidden", "optional", "required")
TASK_SUPPORT_DEFAULT = "forbidden"
