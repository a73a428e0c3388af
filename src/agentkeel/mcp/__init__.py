"""Model Context Protocol: let an Agent call the tools of MCP servers (docs/mcp.md).

Built on the official `mcp` SDK, an optional dependency: ``pip install 'agentkeel[mcp]'``.
"""

try:
    import mcp as _sdk  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ImportError(
        "MCP support needs the optional 'mcp' SDK: pip install 'agentkeel[mcp]'"
    ) from exc

from agentkeel.mcp.config import EnvValue, HttpTransport, MCPOptions, StdioTransport
from agentkeel.mcp.server import MCPServer
from agentkeel.mcp.tool import MCPTool

__all__ = ["EnvValue", "HttpTransport", "MCPOptions", "MCPServer", "MCPTool", "StdioTransport"]
