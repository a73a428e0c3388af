"""Token budgets: a run stops before the model call a budget no longer allows."""

from __future__ import annotations

import calendar

import pytest

from agentkeel import Agent, InMemoryStorage, ScriptedModel, ScriptedToolCall, SessionManager
from agentkeel.errors import BudgetExceededError, ConfigurationError
from agentkeel.messages import open_tool_calls
from agentkeel.models.scripted import ScriptedTurn
from agentkeel.result import Usage
from agentkeel.storage import SessionKey
from agentkeel.tools import tool
from agentkeel.usage import (
    ModelPrice,
    TokenBudgets,
    UsageMeter,
    price_for,
    seconds_until_utc_midnight,
)

pytestmark = pytest.mark.anyio
CALL = Usage(input_tokens=10, output_tokens=5)


@tool
def step() -> str:
    """Do one more step."""
    return "done"


def looping_model(calls: int) -> ScriptedModel:
    turns = [ScriptedTurn(tool_calls=[ScriptedToolCall("step")], usage=CALL)] * calls
    return ScriptedModel([*turns, ScriptedTurn(text="finished", usage=CALL)])


async def test_a_run_over_its_budget_stops_before_the_next_model_call() -> None:
    model = looping_model(5)
    agent = Agent(model, tools=[step], budgets=TokenBudgets(tokens_per_run=20))
    result = await agent.invoke_async("go")
    assert result.status == "failed"
    assert result.error is not None and result.error.code == "budget_exceeded"
    assert len(model.requests) == 2  # 15 tokens < 20 allowed a second call; 30 did not
    assert result.usage == Usage(input_tokens=20, output_tokens=10)
    assert not open_tool_calls(agent.messages)  # a valid history, kept
    assert [m.role for m in agent.messages] == ["user", "assistant", "user", "assistant", "user"]


async def test_a_context_budget_counts_earlier_runs_and_survives_a_new_agent() -> None:
    storage = InMemoryStorage()

    def build(model: ScriptedModel) -> Agent:
        return Agent(
            model,
            session_manager=SessionManager("chat:ctx-budget", storage),
            budgets=TokenBudgets(tokens_per_context=30),
        )

    first = build(ScriptedModel(["one", "two"]))
    assert (await first.invoke_async("a")).status == "completed"
    assert (await first.invoke_async("b")).status == "completed"
    fresh_model = ScriptedModel(["three"])
    later = build(fresh_model)  # as after a restart: the total is in storage
    result = await later.invoke_async("c")
    assert result.error is not None and result.error.code == "budget_exceeded"
    assert fresh_model.requests == []
    assert await later.session_manager.usage() == Usage(input_tokens=20, output_tokens=10)  # type: ignore[union-attr]
    assert len(later.messages) == 4  # the refused turn left the history as it was


async def test_usage_is_kept_per_context_and_per_principal() -> None:
    storage = InMemoryStorage()
    for context in ("ctx-a", "ctx-b"):
        manager = SessionManager(f"chat:{context}", storage, principal="alice")
        await Agent(ScriptedModel(["x"]), session_manager=manager).invoke_async("hi")
    manager = SessionManager("chat:ctx-a", storage, principal="alice")
    assert await manager.usage() == CALL
    assert await manager.principal_usage() == CALL + CALL


async def test_the_daily_budget_renews_at_midnight_utc() -> None:
    storage = InMemoryStorage()
    key = SessionKey(definition="chat", context_id="ctx-1", principal="alice")
    late = calendar.timegm((2026, 12, 1, 23, 59, 0))
    now = [late]
    meter = UsageMeter(
        TokenBudgets(tokens_per_principal_per_day=10), storage, key, clock=lambda: now[0]
    )
    await meter.check(Usage())
    await meter.record(CALL)
    with pytest.raises(BudgetExceededError) as caught:
        await meter.check(Usage())
    assert caught.value.retry_after == 60
    now[0] = late + 61
    await meter.check(Usage())  # a new day


def test_seconds_until_midnight_is_at_least_one() -> None:
    midnight = calendar.timegm((2026, 12, 2, 0, 0, 0))
    assert seconds_until_utc_midnight(midnight - 0.2) == 1
    assert seconds_until_utc_midnight(midnight) == 86_400


def test_prices_compute_cost_by_full_or_bare_model_name() -> None:
    prices = {"gpt-4o-mini": ModelPrice(input=0.15, output=0.6, cached_input=0.075)}
    price = price_for(prices, "openai:gpt-4o-mini")
    assert price is not None
    usage = Usage(input_tokens=1_000_000, output_tokens=500_000, cached_tokens=200_000)
    assert price.cost(usage) == pytest.approx(0.8 * 0.15 + 0.2 * 0.075 + 0.5 * 0.6)
    assert price_for(prices, "anthropic:claude") is None


def test_a_budget_must_be_a_positive_integer() -> None:
    with pytest.raises(ConfigurationError):
        TokenBudgets(tokens_per_run=0)
