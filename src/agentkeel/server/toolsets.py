"""The server's side of toolsets that hold connections (MCP servers): open, check, close.

At start the lifespan builds each definition once (the probe context), gathers the
`ManagedToolset` objects its agents use (one object per definition and server, shared
by every context of the definition), opens each of them, and checks that every name in
an agent's ``approve`` is one of its tools now that the servers' tools are known. A
toolset that cannot start stops the server, with a message naming it. At shutdown, after
the runs have drained, they are closed.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable
from contextlib import AsyncExitStack, asynccontextmanager

from agentkeel.agent import Agent
from agentkeel.errors import ConfigurationError
from agentkeel.framework import Framework
from agentkeel.multiagent import Swarm
from agentkeel.tools.toolset import ManagedToolset

__all__ = ["managed_toolsets", "open_toolsets", "release_toolsets"]

_PROBE_CONTEXT = "agentkeel-probe"
logger = logging.getLogger(__name__)


def _agents(served: Agent | Swarm) -> Iterable[Agent]:
    return served.members.values() if isinstance(served, Swarm) else (served,)


def managed_toolsets(served: Agent | Swarm) -> list[ManagedToolset]:
    """The toolsets with connections that `served`'s agents use."""
    found: list[ManagedToolset] = []
    for agent in _agents(served):
        found.extend(item for item in agent.toolsets if isinstance(item, ManagedToolset))
    return found


async def release_toolsets(served: Agent | Swarm, principal: str | None, context_id: str) -> None:
    """A context left the cache: its per-context connections close (failures are logged)."""
    for toolset in managed_toolsets(served):
        try:
            await toolset.release(principal, context_id)
        except Exception:
            logger.warning(
                "toolset=<%s>, context=<%s> | releasing failed",
                toolset.name,
                context_id,
                exc_info=True,
            )


@asynccontextmanager
async def open_toolsets(framework: Framework) -> AsyncIterator[None]:
    """Open every definition's managed toolsets for the server's lifetime.

    Raises:
        ConfigurationError: One could not start, or an ``approve`` names no tool.
    """
    probes = {
        name: definition.factory(_PROBE_CONTEXT)
        for name, definition in framework.definitions.items()
    }
    async with AsyncExitStack() as stack:
        opened: set[int] = set()
        for served in probes.values():
            for toolset in managed_toolsets(served):
                if id(toolset) in opened:
                    continue
                opened.add(id(toolset))
                await toolset.start()
                stack.push_async_callback(toolset.close)
        for name, served in probes.items():
            _check_approve(framework.source, name, served)
        yield


def _check_approve(source: str, name: str, served: Agent | Swarm) -> None:
    for agent in _agents(served):
        toolsets = managed_toolsets(agent)
        if not toolsets:
            continue
        known = set(agent.tools)
        for toolset in toolsets:
            known.update(toolset.tool_names)
            known.update(f"{toolset.name}_{tool}" for tool in toolset.tool_names)
        for approved in sorted(agent.approve - known):
            where = f"agents.{name}.approve" if agent.name == name else f"agents.{name}"
            raise ConfigurationError(
                f"{source}: {where}: {approved!r} is not one of the tools of agent "
                f"{agent.name!r} or of its MCP servers"
            )
