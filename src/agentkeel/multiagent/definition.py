"""Building a swarm per context from member factories (a framework.json swarm)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from agentkeel.agent import Agent
from agentkeel.errors import ConfigurationError
from agentkeel.multiagent.loop import SwarmLimits
from agentkeel.multiagent.swarm import Swarm

__all__ = ["MemberFactory", "swarm_factory"]

MemberFactory = Callable[[str], object]
"""Builds one member for a context id; it must return an Agent."""


def swarm_factory(
    name: str,
    members: Sequence[tuple[str, MemberFactory]],
    *,
    description: str = "",
    entry: str | None = None,
    limits: SwarmLimits | None = None,
) -> Callable[[str], Swarm]:
    """A factory building a new Swarm, with new members, for every context.

    Each member is renamed to its name in the swarm, so the same agent definition can
    serve alone and as a member. A member factory returning anything but an Agent (a
    swarm inside a swarm) is a ConfigurationError.
    """
    bounds = limits or SwarmLimits()

    def member(context_id: str, member_name: str, factory: MemberFactory) -> Agent:
        built = factory(context_id)
        if not isinstance(built, Agent):
            raise ConfigurationError(f"swarm member {member_name!r} must be an Agent")
        built.name = member_name
        return built

    def build(context_id: str) -> Swarm:
        return Swarm(
            [member(context_id, member_name, factory) for member_name, factory in members],
            entry=entry,
            max_handoffs=bounds.max_handoffs,
            max_iterations=bounds.max_iterations,
            timeout=bounds.timeout,
            name=name,
            description=description,
        )

    return build
