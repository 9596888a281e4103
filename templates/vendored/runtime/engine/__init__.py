"""The task engine: tasks' lives (status, result, inputs, ttl, limits, audit, wake-ups),
no MCP and no wire format."""
