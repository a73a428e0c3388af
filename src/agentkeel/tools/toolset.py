"""Toolset: a source of tools that are only known at run time (an MCP server's, say).

A `@tool` function is fixed when the Agent is built. A toolset's tools come from
somewhere else and may change between runs (an MCP server announces a new list), so the
Agent asks each toolset for its current tools at the start of every run and hands the
run loop one mapping of static and dynamic tools alike; the loop never knows the
difference.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Protocol, runtime_checkable

from agentkeel.context import RunContext
from agentkeel.tools.decorator import Tool

__all__ = ["ManagedToolset", "Toolset", "resolve_tools"]

logger = logging.getLogger(__name__)


@runtime_checkable
class Toolset(Protocol):
    """Tools provided at run time, in the Agent's ``tools`` beside `@tool` functions."""

    @property
    def name(self) -> str:
        """A short name, used to tell colliding tool names apart (``<name>_<tool>``)."""
        ...

    async def list_tools(self, context: RunContext) -> Sequence[Tool]:
        """The tools for this run; never raises (a source that is down lists what it last had)."""
        ...


@runtime_checkable
class ManagedToolset(Toolset, Protocol):
    """A toolset holding connections: opened by the server's lifespan, closed at shutdown."""

    @property
    def listed_tools(self) -> Mapping[str, str]:
        """Its tools when it was last listed, name to description (``approve``, the catalog)."""
        ...

    async def start(self) -> None:
        """Open it; raises ConfigurationError, naming it, when it cannot start."""
        ...

    async def close(self) -> None:
        """Close everything it holds."""
        ...

    async def release(self, principal: str | None, context_id: str | None) -> None:
        """A context left the server's cache: drop what was held for it alone."""
        ...


async def resolve_tools(
    static: Mapping[str, Tool], toolsets: Sequence[Toolset], context: RunContext
) -> dict[str, Tool]:
    """One mapping of every tool a run may call.

    A toolset's tool keeps its own name unless it collides with a `@tool` or another
    toolset's tool; then it is renamed ``<toolset>_<tool>`` (and dropped, with a warning,
    if even that collides).
    """
    tools = dict(static)
    listed = [(toolset, await toolset.list_tools(context)) for toolset in toolsets]
    counts: dict[str, int] = {}
    for _, items in listed:
        for item in items:
            counts[item.name] = counts.get(item.name, 0) + 1
    for toolset, items in listed:
        for item in items:
            name = item.name
            if name in static or counts[name] > 1:
                name = f"{toolset.name}_{item.name}"
            if name in tools:
                logger.warning(
                    "toolset=<%s>, tool=<%s> | dropped: the name is taken", toolset.name, name
                )
                continue
            tools[name] = item if name == item.name else replace(item, name=name)
    return tools
