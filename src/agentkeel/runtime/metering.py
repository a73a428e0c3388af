"""Usage and budgets around the served agents: token metrics, budgets, prices.

Every agent a definition's factory builds counts its tokens in the server's metrics and
runs under the framework's budgets (an agent that sets budgets of its own keeps them);
a principal whose tokens for today are spent gets no new turn (``429``); a finished
run's SendResult carries its cost when the framework prices its model.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from agentkeel.agent import Agent
from agentkeel.errors import BudgetExceededError
from agentkeel.framework import Framework
from agentkeel.hooks.events import AfterModelCallEvent, HookEvent
from agentkeel.hooks.registry import HookCallback
from agentkeel.runtime.contexts import ContextEntry
from agentkeel.runtime.metrics import ServerMetrics
from agentkeel.servable import ServableFront, Served
from agentkeel.serving import ServedFactory
from agentkeel.storage.base import SessionKey
from agentkeel.storage.usage import UsageStorage, utc_day
from agentkeel.usage import ModelPrice, seconds_until_utc_midnight

__all__ = ["AgentHooks", "check_daily_budget", "metered", "price_of"]

AgentHooks = Sequence[tuple[type[HookEvent], HookCallback[Any]]]
"""Hook callbacks every served agent gets (the bindings add theirs)."""


def metered(
    definition: str,
    factory: ServedFactory,
    framework: Framework,
    metrics: ServerMetrics,
    agent_hooks: AgentHooks,
) -> ServedFactory:
    """`factory`, its agents counting tokens in the metrics, under the budgets.

    An agent that sets budgets of its own keeps them; others get the framework's.
    `agent_hooks` is read at each build, so hooks added after this call apply too.
    """

    def count(event: AfterModelCallEvent) -> None:
        usage = event.usage
        for kind, amount in (
            ("input", usage.input_tokens),
            ("output", usage.output_tokens),
            ("cached", usage.cached_tokens),
            ("reasoning", usage.reasoning_tokens),
        ):
            if amount:
                metrics.tokens.inc(definition, kind, amount=float(amount))

    def build(context_id: str) -> Served:
        served = factory(context_id)
        # what is not servable is refused by the cache
        agents = served.agents if isinstance(served, ServableFront) else ()
        for agent in agents:
            if not agent.budgets.any:
                agent.budgets = framework.usage.budgets
            agent.hooks.add_callback(AfterModelCallEvent, count)
            for event_type, callback in agent_hooks:
                agent.hooks.add_callback(event_type, callback)
        return served

    return build


async def check_daily_budget(framework: Framework, key: SessionKey) -> None:
    """Refuse a new turn of a principal whose tokens for today are spent (429)."""
    limit = framework.usage.budgets.tokens_per_principal_per_day
    storage = framework.storage
    if limit is None or not isinstance(storage, UsageStorage):
        return
    now = time.time()
    spent = await storage.principal_usage(key.principal, utc_day(now))
    if spent.total_tokens >= limit:
        raise BudgetExceededError(
            f"today's budget of {limit} tokens is used; it renews at midnight UTC",
            retry_after=seconds_until_utc_midnight(now),
        )


def price_of(framework: Framework, entry: ContextEntry) -> ModelPrice | None:
    """The price of the model of `entry`'s agent, if the framework prices it."""
    agent = entry.agent
    return framework.usage.price(agent.model.name) if isinstance(agent, Agent) else None
