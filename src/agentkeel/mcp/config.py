"""What an MCP server is: how to reach it, and the policy agentkeel applies to its tools.

Plain frozen dataclasses, built by `MCPServer.stdio` / `MCPServer.http` in code or by
framework.json's ``mcp`` key (`agentkeel.framework`). Secrets are never kept in the
configuration file: an environment value or header written as ``{"env": "NAME"}`` is
read when the connection opens, and never appears in a repr, a log line or an error.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from agentkeel.errors import ConfigurationError

__all__ = [
    "EnvValue",
    "HttpTransport",
    "IdentityMode",
    "MCPOptions",
    "StdioTransport",
    "Transport",
    "resolve_values",
]

SERVER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")

IdentityMode = Literal["none", "meta", "headers"]
"""How a call tells the server who is calling: not at all, in the request's ``_meta``
(``agentkeel/contextId``, ``agentkeel/principal``), or as HTTP headers on a per-context
connection (``X-Agentkeel-Context-Id``, ``X-Agentkeel-Principal``)."""


@dataclass(frozen=True, slots=True)
class EnvValue:
    """A value read from the environment variable `name` when the connection opens."""

    name: str

    def __repr__(self) -> str:
        return f"EnvValue({self.name!r})"


Value: TypeAlias = str | EnvValue


@dataclass(frozen=True, slots=True, kw_only=True)
class StdioTransport:
    """A server started as a child process, speaking MCP on its stdin and stdout."""

    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, Value] = field(default_factory=dict, repr=False)
    """Variables added to the child's environment (the parent's PATH and HOME stay)."""
    cwd: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpTransport:
    """A server reached over MCP's streamable HTTP transport."""

    url: str
    headers: Mapping[str, Value] = field(default_factory=dict, repr=False)


Transport: TypeAlias = StdioTransport | HttpTransport


@dataclass(frozen=True, slots=True, kw_only=True)
class MCPOptions:
    """What agentkeel does with a server's tools."""

    prefix: str = ""
    """Prepended to every tool name (``"files_"`` makes ``read_file`` ``files_read_file``)."""
    tools: frozenset[str] | None = None
    """Keep only these tools (their MCP names); None keeps all."""
    timeout: float | None = 60.0
    """Seconds one call may take before it is cancelled with an error result."""
    start_timeout: float = 15.0
    """Seconds the server gets to start and answer the handshake and the tool listing."""
    per_context: bool = False
    """A connection per context (closed when the context leaves the cache), for servers
    that keep state per client; otherwise one connection serves every context."""
    identity: IdentityMode = "none"
    """Whether calls carry the context id and principal (see `IdentityMode`)."""


def resolve_values(values: Mapping[str, Value], what: str) -> dict[str, str]:
    """The actual strings of `values`, reading ``{"env": ...}`` ones now.

    Raises:
        ConfigurationError: A named environment variable is not set (the message names
            the variable, never a value).
    """
    resolved: dict[str, str] = {}
    for key, value in values.items():
        if isinstance(value, EnvValue):
            found = os.environ.get(value.name)
            if found is None:
                raise ConfigurationError(
                    f"{what} {key!r} needs the environment variable {value.name}, which is not set"
                )
            resolved[key] = found
        else:
            resolved[key] = value
    return resolved
