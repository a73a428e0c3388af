"""framework.json's ``mcp`` key (SPEC 5) to MCPServer objects.

framework.py hands over each agent's ``mcp`` object as parsed JSON; this module
validates it as strictly as the rest of the file (unknown keys, types, stdio or HTTP but
not both), and every problem names the file and the key path, e.g.
``framework.json: agents.files.mcp.fs.tmeout: unknown key``. A stdio server runs in the
framework file's folder unless ``cwd`` says otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from agentkeel.errors import ConfigurationError
from agentkeel.mcp.config import EnvValue, HttpTransport, MCPOptions, StdioTransport, Transport
from agentkeel.mcp.server import MCPServer

__all__ = ["mcp_servers"]

ErrorAt = Callable[[str, str], ConfigurationError]
"""Builds the error for a key path and a message (the loader's, naming the file)."""


class _Entry(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        strict=True,
        frozen=True,
        hide_input_in_errors=True,
    )


class _Env(_Entry):
    env: str = Field(min_length=1)


class _Server(_Entry):
    command: str | None = Field(default=None, min_length=1)
    args: list[str] = []
    env: dict[str, str | _Env] = {}
    cwd: str | None = None
    url: str | None = Field(default=None, min_length=1)
    headers: dict[str, str | _Env] = {}
    prefix: str = ""
    tools: list[str] | None = None
    timeout: float | None = Field(default=None, gt=0)
    start_timeout: float | None = Field(default=None, gt=0)
    per_context: bool = False
    identity: Literal["none", "meta", "headers"] = "none"


def _values(raw: Mapping[str, str | _Env]) -> dict[str, str | EnvValue]:
    return {k: EnvValue(v.env) if isinstance(v, _Env) else v for k, v in raw.items()}


def _first_error(exc: ValidationError) -> tuple[str, str]:
    error = exc.errors(include_url=False, include_input=False)[0]
    parts = [p for p in error["loc"] if not (isinstance(p, str) and p in ("str", "_Env"))]
    key = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        message = "unknown key"
    return key, message


def _transport(config: _Server, cwd: Path) -> Transport:
    if (config.command is None) == (config.url is None):
        raise ConfigurationError("set either command (stdio) or url (streamable HTTP)")
    if config.url is not None:
        mixed = [key for key in ("args", "env", "cwd") if getattr(config, key)]
        if mixed:
            raise ConfigurationError(f"{', '.join(mixed)}: only for a stdio server (command)")
        return HttpTransport(url=config.url, headers=_values(config.headers))
    if config.headers:
        raise ConfigurationError("headers: only for an HTTP server (url)")
    return StdioTransport(
        command=str(config.command),
        args=tuple(config.args),
        env=_values(config.env),
        cwd=str(cwd / config.cwd if config.cwd else cwd),
    )


def mcp_servers(
    entries: Mapping[str, object], *, path: str, agent: str, base: Path, error: ErrorAt
) -> list[MCPServer]:
    """One MCPServer per entry of an agent's ``mcp`` object.

    Args:
        entries: The parsed ``mcp`` object.
        path: Its key path (``agents.<name>.mcp``), for messages.
        agent: The agent's name (a server is labelled ``<agent>.mcp.<server>``).
        base: The framework file's folder (a stdio server's default ``cwd``).
        error: Builds the error naming the file.

    Raises:
        ConfigurationError: For anything wrong, naming the key path and the file.
    """
    servers: list[MCPServer] = []
    for name, raw in entries.items():
        where = f"{path}.{name}"
        try:
            config = _Server.model_validate(raw)
        except ValidationError as exc:
            key, message = _first_error(exc)
            raise error(f"{where}{key}", message) from None
        defaults = MCPOptions()
        try:
            options = MCPOptions(
                prefix=config.prefix,
                tools=None if config.tools is None else frozenset(config.tools),
                timeout=config.timeout or defaults.timeout,
                start_timeout=config.start_timeout or defaults.start_timeout,
                per_context=config.per_context,
                identity=config.identity,
            )
            server = MCPServer(name, _transport(config, base), options, label=f"{agent}.mcp.{name}")
        except ConfigurationError as exc:
            raise error(where, exc.message) from None
        servers.append(server)
    return servers
