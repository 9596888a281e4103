"""mcptask-gen: generate typed MCP Tasks bindings and a runtime from the MCP JSON schema."""

__version__ = "0.1.0"

__all__ = ["__version__"]
