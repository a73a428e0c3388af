"""What runs cost: token budgets, the meter that enforces them, and optional prices.

A run's meter is asked before every model call whether a budget still allows one, and
told after every call what it used. The counts go to storage (a `UsageStorage`) per
context and per principal and UTC day, so totals survive restarts and are shared by
every replica reading the same storage. A budget is checked before a call, never in the
middle of one: a call that starts under budget finishes, so a run can end over its
budget by at most the tokens of its last call.

On a storage that bundles a commit's writes (`BundledCommitStorage`: PostgreSQL) the
counts wait in an `UnsavedUsage` until the run is saved and go in the same statement as
its history (no round trip of their own); the meter adds them to what it reads back, so
a budget sees them. A process killed mid-run then loses that run's count with the run.

Prices are optional and never built in (they change): a framework lists them per model
per million tokens, and the cost of a run is computed from its usage when one is set.
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from agentkeel.errors import BudgetExceededError, ConfigurationError
from agentkeel.result import Usage
from agentkeel.storage.base import SessionKey
from agentkeel.storage.usage import UsageStorage, utc_day

__all__ = [
    "BudgetsConfig",
    "ModelPrice",
    "PriceConfig",
    "TokenBudgets",
    "UsageMeter",
    "UnsavedUsage",
    "UsagePolicy",
    "price_for",
    "seconds_until_utc_midnight",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenBudgets:
    """Token limits (input plus output); None means no limit.

    Context and principal budgets need a session whose storage keeps usage
    (`UsageStorage`: every bundled backend does); without one only `tokens_per_run`
    applies.
    """

    tokens_per_run: int | None = None
    tokens_per_context: int | None = None
    tokens_per_principal_per_day: int | None = None

    def __post_init__(self) -> None:
        for name in ("tokens_per_run", "tokens_per_context", "tokens_per_principal_per_day"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise ConfigurationError(f"budget {name} must be an integer, not {value!r}")
            if value is not None and value < 1:
                raise ConfigurationError(f"budget {name} must be at least 1")

    @property
    def any(self) -> bool:
        """Whether any limit is set."""
        return any(
            value is not None
            for value in (
                self.tokens_per_run,
                self.tokens_per_context,
                self.tokens_per_principal_per_day,
            )
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelPrice:
    """A model's price per million tokens, in whatever currency the prices are given.

    `cached_input` prices input tokens read from the provider's cache; None prices them
    as ordinary input.
    """

    input: float
    output: float
    cached_input: float | None = None

    def cost(self, usage: Usage) -> float:
        """What `usage` costs at this price."""
        cached = usage.cached_tokens if self.cached_input is not None else 0
        total = (
            (usage.input_tokens - cached) * self.input
            + cached * (self.cached_input or 0.0)
            + usage.output_tokens * self.output
        )
        return round(total / 1_000_000, 10)


class _FileSection(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        strict=True,
        frozen=True,
        hide_input_in_errors=True,
    )


class BudgetsConfig(_FileSection):
    """The ``budgets`` section of a framework.json."""

    tokens_per_run: int | None = Field(default=None, ge=1)
    tokens_per_context: int | None = Field(default=None, ge=1)
    tokens_per_principal_per_day: int | None = Field(default=None, ge=1)

    def build(self) -> TokenBudgets:
        """The budgets this section sets."""
        return TokenBudgets(**self.model_dump())


class PriceConfig(_FileSection):
    """One model's entry of the ``prices`` section, per million tokens."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cached_input: float | None = Field(default=None, ge=0)

    def build(self) -> ModelPrice:
        """The price this entry sets."""
        return ModelPrice(**self.model_dump())


@dataclass(frozen=True, slots=True, kw_only=True)
class UsagePolicy:
    """A framework's budgets (for agents without their own) and its prices."""

    budgets: TokenBudgets = field(default_factory=TokenBudgets)
    prices: Mapping[str, ModelPrice] = field(default_factory=dict)
    """Per model name, per million tokens; a model without one shows no cost."""

    @classmethod
    def of(cls, budgets: BudgetsConfig, prices: Mapping[str, PriceConfig]) -> UsagePolicy:
        """The policy of a framework.json's ``budgets`` and ``prices`` sections."""
        return cls(budgets=budgets.build(), prices={name: p.build() for name, p in prices.items()})

    def price(self, model_name: str) -> ModelPrice | None:
        """The price of a model, if one is set (see `price_for`)."""
        return price_for(self.prices, model_name) if self.prices else None


def price_for(prices: Mapping[str, ModelPrice], model_name: str) -> ModelPrice | None:
    """The price of a model by its full name (``openai:gpt-4o-mini``) or bare name."""
    found = prices.get(model_name)
    if found is None and ":" in model_name:
        found = prices.get(model_name.split(":", 1)[1])
    return found


def seconds_until_utc_midnight(now: float | None = None) -> int:
    """Whole seconds until the next UTC day begins (at least 1): a daily budget renews."""
    at = time.time() if now is None else now
    day = time.gmtime(at)
    midnight = calendar.timegm((day.tm_year, day.tm_mon, day.tm_mday, 0, 0, 0)) + 86_400
    return max(1, int(midnight - at + 0.999))


class UnsavedUsage:
    """Tokens counted but not stored yet: they go with the run's save (one statement)."""

    def __init__(self) -> None:
        self.usage = Usage()

    def add(self, usage: Usage) -> None:
        """Count one model call."""
        self.usage = self.usage + usage

    def take(self) -> Usage:
        """What was counted, which is then no longer this object's to save."""
        usage, self.usage = self.usage, Usage()
        return usage


class UsageMeter:
    """The meter of one agent's runs: records calls in storage, enforces `budgets`.

    Args:
        budgets: The limits to enforce.
        storage: Where the totals live; None counts nothing beyond the run itself.
        key: The session the runs belong to (its principal owns the daily total).
        clock: Unix time, injectable so a test can cross midnight.
        unsaved: Where calls are counted until their run's save writes them, instead
            of one storage write per call (None writes each call at once).
    """

    def __init__(
        self,
        budgets: TokenBudgets,
        storage: UsageStorage | None = None,
        key: SessionKey | None = None,
        *,
        clock: Callable[[], float] = time.time,
        unsaved: UnsavedUsage | None = None,
    ) -> None:
        self.budgets = budgets
        self._storage = storage if key is not None else None
        self._key = key
        self._clock = clock
        self._unsaved = unsaved

    async def check(self, run_usage: Usage) -> None:
        """Raise BudgetExceededError when a budget is spent (see the module docstring)."""
        budgets = self.budgets
        limit = budgets.tokens_per_run
        if limit is not None and run_usage.total_tokens >= limit:
            raise BudgetExceededError(f"the run used its budget of {limit} tokens")
        if self._storage is None or self._key is None:
            return
        waiting = 0 if self._unsaved is None else self._unsaved.usage.total_tokens
        limit = budgets.tokens_per_context
        if limit is not None:
            spent = await self._storage.context_usage(self._key)
            if spent.total_tokens + waiting >= limit:
                raise BudgetExceededError(f"the conversation used its budget of {limit} tokens")
        limit = budgets.tokens_per_principal_per_day
        if limit is not None:
            now = self._clock()
            spent = await self._storage.principal_usage(self._key.principal, utc_day(now))
            if spent.total_tokens + waiting >= limit:
                raise BudgetExceededError(
                    f"today's budget of {limit} tokens is used; it renews at midnight UTC",
                    retry_after=seconds_until_utc_midnight(now),
                )

    async def record(self, usage: Usage) -> None:
        """Add one model call's usage to the context's and the principal's totals."""
        if self._unsaved is not None and usage.total_tokens:
            self._unsaved.add(usage)
        elif self._storage is not None and self._key is not None and usage.total_tokens:
            await self._storage.add_usage(self._key, usage, day=utc_day(self._clock()))
