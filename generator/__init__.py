"""mcptask-gen: generate typed MCP Tasks bindings and a runtime from the MCP JSON schema."""

__version__ = "0.1.0"
#: The version of the hand-written machinery every generated package carries (``_handlers``,
#: ``_errors``, ...): a runtime serves packages of the same bindings API only. Raise it when a
#: change to that machinery is not compatible with packages generated before it.
BINDINGS_API = 1

__all__ = ["BINDINGS_API", "__version__"]
