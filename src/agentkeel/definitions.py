"""Agent definitions: how the server builds an agent per context and what it shows of it.

An `AgentDefinition` is one named agent of a framework: its factory, called as
``factory(context_id)`` for a *new* Agent (or Swarm) per context, and its `Catalog`
(description and tools, for ``GET /agents`` and the agent card). A declared agent's
catalog comes from framework.json; a factory's from one call at start with the reserved
`CATALOG_CONTEXT_ID` (which the factory may refuse), else from its first real context.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from agentkeel.agent import Agent
from agentkeel.errors import ConfigurationError, ContextRefusedError
from agentkeel.multiagent import Swarm
from agentkeel.servable import Served
from agentkeel.tools.toolset import Toolset

__all__ = [
    "CATALOG_CONTEXT_ID",
    "AgentDefinition",
    "AgentFactory",
    "Catalog",
    "checked_factory",
    "describe_factory",
]

logger = logging.getLogger(__name__)

AgentFactory = Callable[[str], Agent | Swarm]
"""Builds a new Agent (or Swarm) for one context id; never one shared between contexts."""

CATALOG_CONTEXT_ID = "#catalog"
"""The context id a factory is called with at start, to check it and list its tools.

Outside SPEC section 2's pattern, so no request can ever name it and nothing is stored
under it (the Agent built for it is dropped). A factory that checks its contexts may
refuse it with ContextRefusedError; its tools are then learned from the first real
context.
"""


@dataclass(slots=True, kw_only=True)
class Catalog:
    """What a definition's agents offer: a description and their tools' descriptions.

    A declared agent's catalog is known from framework.json. A ``factory``'s is learned
    from the first Agent (or Swarm) it builds for a real context, or, when a card is
    asked for first, from one call with `CATALOG_CONTEXT_ID`.
    """

    description: str = ""
    tools: dict[str, str] = field(default_factory=dict)
    """Tool name to its description, in the agent's order."""
    known: bool = True
    """False until the tools are known (a factory nobody called yet)."""
    asked: bool = False
    """The factory was called with CATALOG_CONTEXT_ID once already."""
    toolsets: tuple[Toolset, ...] | None = None
    """The toolsets (MCP servers) of the agent it learned from, which the server's
    lifespan opens; None when it learned from no built agent."""

    def learn(self, served: Served) -> None:
        """Take the tools (and, if none was set, the description) of a built agent."""
        if self.known:
            return
        self.toolsets = tuple(item for agent in served.agents for item in agent.toolsets)
        self.tools = {name: item.description for name, item in served.tools.items()}
        self.description = self.description or served.description
        self.known = True


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentDefinition:
    """One named agent of the framework: what `GET /agents` lists and how to build it."""

    name: str
    factory: AgentFactory
    catalog: Catalog = field(default_factory=Catalog)
    kind: Literal["agent", "swarm"] = "agent"
    """A swarm keeps its members' memory beside its own session (see docs/swarm.md)."""

    @property
    def description(self) -> str:
        """What the agent does (framework.json's, else the built agent's, once known)."""
        return self.catalog.description

    @property
    def skills(self) -> tuple[str, ...]:
        """The names of the agent's tools (as far as known: see `describe`)."""
        return tuple(self.catalog.tools)

    def describe(self) -> Catalog:
        """The catalog, learned now if needed (one factory call with CATALOG_CONTEXT_ID).

        Called by what shows the agent to clients (the agent card, ``GET /agents``),
        never at start. A factory that refuses that id (or fails) is not asked again;
        its tools are listed as none until a real context is built.
        """
        catalog = self.catalog
        if not catalog.known and not catalog.asked:
            catalog.asked = True
            try:
                catalog.learn(self.factory(CATALOG_CONTEXT_ID))
            except Exception as exc:
                logger.info("definition=<%s> | not described by its factory: %r", self.name, exc)
        return catalog


def describe_factory(factory: AgentFactory, description: str = "") -> Catalog:
    """Check a factory at start by calling it once with `CATALOG_CONTEXT_ID`.

    A broken factory (it raises, or returns no Agent) stops the start rather than
    failing the first request. A factory that checks its contexts may refuse the
    catalog id with ContextRefusedError: the start goes on, and the definition's tools
    are learned from the first real context instead.

    Raises:
        ConfigurationError: The factory failed, or built neither an Agent nor a Swarm.
    """
    catalog = Catalog(description=description, known=False, asked=True)
    try:
        built = factory(CATALOG_CONTEXT_ID)
    except ContextRefusedError:
        return catalog
    except ConfigurationError:
        raise
    except Exception as exc:
        raise ConfigurationError(f"calling the factory failed: {exc!r}") from None
    catalog.learn(built)
    return catalog


def checked_factory(target: Callable[..., object], name: str) -> AgentFactory:
    """Wrap a user factory so that it must return an Agent or a Swarm (or fail clearly)."""

    def build(context_id: str) -> Agent | Swarm:
        built = target(context_id)
        if not isinstance(built, Agent | Swarm):
            raise ConfigurationError(
                f"the factory of agent {name!r} returned {type(built).__name__}, "
                "not an Agent or a Swarm"
            )
        return built

    return build
