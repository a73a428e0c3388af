"""framework.json's ``mcp`` key (SPEC 5) to MCPServer objects.

framework.py validates the shape (unknown keys, types); this module checks what depends
on the combination (stdio or HTTP, not both) and builds the server. A stdio server runs
in the framework file's folder unless ``cwd`` says otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping

from agentkeel.errors import ConfigurationError
from agentkeel.mcp.config import EnvValue, HttpTransport, MCPOptions, StdioTransport, Transport
from agentkeel.mcp.server import MCPServer

__all__ = ["mcp_server"]

_STDIO_ONLY = ("args", "env", "cwd")


def _values(raw: object) -> dict[str, str | EnvValue]:
    values: dict[str, str | EnvValue] = {}
    if isinstance(raw, Mapping):
        for key, value in raw.items():
            if isinstance(value, Mapping):
                values[str(key)] = EnvValue(str(value["env"]))
            else:
                values[str(key)] = str(value)
    return values


def mcp_server(name: str, config: Mapping[str, object], *, label: str, cwd: str) -> MCPServer:
    """The MCPServer of one ``mcp`` entry (already validated for shape).

    Raises:
        ConfigurationError: The entry is neither stdio nor HTTP, or mixes the two.
    """
    command, url = config.get("command"), config.get("url")
    if (command is None) == (url is None):
        raise ConfigurationError("set either command (stdio) or url (streamable HTTP)")
    transport: Transport
    if isinstance(url, str):
        mixed = [key for key in _STDIO_ONLY if config.get(key)]
        if mixed:
            raise ConfigurationError(f"{', '.join(mixed)}: only for a stdio server (command)")
        transport = HttpTransport(url=url, headers=_values(config.get("headers")))
    else:
        if config.get("headers"):
            raise ConfigurationError("headers: only for an HTTP server (url)")
        args = config.get("args") or []
        transport = StdioTransport(
            command=str(command),
            args=tuple(str(arg) for arg in args) if isinstance(args, list) else (),
            env=_values(config.get("env")),
            cwd=cwd,
        )
    defaults = MCPOptions()
    tools = config.get("tools")
    timeout = config.get("timeout")
    start_timeout = config.get("start_timeout")
    identity = config.get("identity")
    options = MCPOptions(
        prefix=str(config.get("prefix") or ""),
        tools=frozenset(str(t) for t in tools) if isinstance(tools, list) else None,
        timeout=float(timeout) if isinstance(timeout, int | float) else defaults.timeout,
        start_timeout=float(start_timeout)
        if isinstance(start_timeout, int | float)
        else defaults.start_timeout,
        per_context=bool(config.get("per_context")),
        identity=identity if identity in ("meta", "headers") else "none",
    )
    return MCPServer(name, transport, options, label=label)
