"""The server's side of toolsets that hold connections (MCP servers): open, check, close.

At start the lifespan builds each definition once (with `CATALOG_CONTEXT_ID`), gathers
the `ManagedToolset` objects its agents use (one object per definition and server,
shared by every context of the definition), opens each of them, checks that every name
in an agent's ``approve`` is one of its tools now that the servers' tools are known, and
adds those tools to the definition's catalog (``GET /agents``, the agent card). A
toolset that cannot start stops the server, with a message naming it. At shutdown, after
the runs have drained, they are closed. A factory that refuses the catalog context
(ContextRefusedError) cannot show its toolsets here: it must open them itself.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable
from contextlib import AsyncExitStack, asynccontextmanager

from agentkeel.agent import Agent
from agentkeel.definitions import CATALOG_CONTEXT_ID
from agentkeel.errors import ConfigurationError, ContextRefusedError
from agentkeel.framework import Framework
from agentkeel.multiagent import Swarm
from agentkeel.tools.toolset import ManagedToolset

__all__ = ["managed_toolsets", "open_toolsets", "release_toolsets"]

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
    probes: dict[str, Agent | Swarm] = {}
    for name, definition in framework.definitions.items():
        try:
            probes[name] = definition.factory(CATALOG_CONTEXT_ID)
        except ContextRefusedError:
            logger.info("definition=<%s> | refuses the catalog context: no toolsets opened", name)
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
            catalog = framework.definitions[name].catalog
            for toolset in managed_toolsets(served):
                for tool, description in toolset.listed_tools.items():
                    catalog.tools.setdefault(tool, description)
        yield


def _check_approve(source: str, name: str, served: Agent | Swarm) -> None:
    for agent in _agents(served):
        toolsets = managed_toolsets(agent)
        if not toolsets:
            continue
        known = set(agent.tools)
        for toolset in toolsets:
            known.update(toolset.listed_tools)
            known.update(f"{toolset.name}_{tool}" for tool in toolset.listed_tools)
        for approved in sorted(agent.approve - known):
            where = f"agents.{name}.approve" if agent.name == name else f"agents.{name}"
            raise ConfigurationError(
                f"{source}: {where}: {approved!r} is not one of the tools of agent "
                f"{agent.name!r} or of its MCP servers"
            )
