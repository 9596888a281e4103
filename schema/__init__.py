"""Rules overlays, one per MCP protocol revision (shipped as mcptask_gen.rules)."""
