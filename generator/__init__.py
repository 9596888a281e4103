"""mcptask-gen: generate typed MCP Tasks bindings and a runtime from the MCP JSON schema."""

__version__ = "0.1.0"
#: The version of the hand-written machinery every generated package carries (``_handlers``,
#: ``_errors``, ...): a runtime serves packages of the same bindings API only. Raise it when a
#: change to that machinery is not compatible with packages generated before it.
BINDINGS_API = 1
#: The distribution of the runtime that serves generated packages (``mcp_tasks.runtime``),
#: released with the generator under one version.
RUNTIME_DISTRIBUTION = "mcptask-runtime"


def runtime_requirement(version: str = __version__) -> str:
    """The runtime versions that serve a package this generator ``version`` wrote, as a
    requirement line: from the same version up to the next release that may break it (the
    next minor before 1.0, the next major after), as protobuf's generated code names the
    runtimes that may load it."""
    numbers = [int(n) for n in version.split("+")[0].split(".")[:3] if n.isdigit()]
    major, minor = (numbers + [0, 0])[:2]
    below = f"0.{minor + 1}" if major == 0 else f"{major + 1}"
    return f"{RUNTIME_DISTRIBUTION}>={version},<{below}"


__all__ = ["BINDINGS_API", "RUNTIME_DISTRIBUTION", "__version__", "runtime_requirement"]
