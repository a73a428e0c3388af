"""The server's side of toolsets that hold connections (MCP servers): open, check, close.

At start the lifespan builds each definition once (with `CATALOG_CONTEXT_ID`), gathers
the `ManagedToolset` objects its agents use (one object per definition and server,
shared by every context of the definition), opens each of them, checks that every name
in an agent's ``approve`` is one of its tools now that the servers' tools are known, and
adds those tools to the definition's catalog (``GET /agents``, the agent card). A
toolset that cannot start stops the server, with a message naming it. At shutdown, after
the runs have drained, they are closed. A ``factory`` is not called again: the toolsets
of the agent it built at load (its catalog) are used; one that refused the catalog
context (ContextRefusedError) cannot show its toolsets here and must open them itself.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

from agentkeel.definitions import CATALOG_CONTEXT_ID
from agentkeel.errors import ConfigurationError
from agentkeel.framework import Framework
from agentkeel.servable import Served
from agentkeel.tools.toolset import ManagedToolset

__all__ = ["managed_toolsets", "open_toolsets", "release_toolsets"]

logger = logging.getLogger(__name__)


def managed_toolsets(served: Served) -> list[ManagedToolset]:
    """The toolsets with connections that `served`'s agents use."""
    found: list[ManagedToolset] = []
    for agent in served.agents:
        found.extend(item for item in agent.toolsets if isinstance(item, ManagedToolset))
    return found


async def release_toolsets(served: Served, principal: str | None, context_id: str) -> None:
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
    found: dict[str, list[ManagedToolset]] = {}
    declared: dict[str, Served] = {}
    for name, definition in framework.definitions.items():
        learned = definition.catalog.toolsets
        if learned is not None:  # the factory was called at load: no second call
            found[name] = [item for item in learned if isinstance(item, ManagedToolset)]
        elif definition.catalog.known:  # declared in framework.json: building is cheap
            declared[name] = definition.factory(CATALOG_CONTEXT_ID)
            found[name] = managed_toolsets(declared[name])
        else:
            logger.info("definition=<%s> | refused the catalog context: no toolsets opened", name)
    async with AsyncExitStack() as stack:
        opened: set[int] = set()
        for toolsets in found.values():
            for toolset in toolsets:
                if id(toolset) in opened:
                    continue
                opened.add(id(toolset))
                await toolset.start()
                stack.push_async_callback(toolset.close)
        for name, served in declared.items():
            _check_approve(framework.source, name, served)
        for name, toolsets in found.items():
            catalog = framework.definitions[name].catalog
            for toolset in toolsets:
                for tool, description in toolset.listed_tools.items():
                    catalog.tools.setdefault(tool, description)
        yield


def _check_approve(source: str, name: str, served: Served) -> None:
    """Each ``approve`` name of a declared agent with toolsets must be one of its tools.

    framework.json could not check the names of MCP tools before the servers started.
    """
    for agent in served.agents:
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
