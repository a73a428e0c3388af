"""A tiny in-process metrics registry rendered in the Prometheus text format.

No dependency: a server exposes a handful of series (runs by status, turn latency, time
to first token, tool calls, cached contexts, queued turns, evictions), and a client
library would cost more than these hundred lines. Each app owns its registry, so two
servers in one process (tests, benchmarks) never mix their numbers. Label values are
passed positionally, in the order the metric declared its label names.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

__all__ = ["Counter", "Gauge", "Histogram", "MetricsRegistry", "ServerMetrics"]

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
"""Seconds; from a cached scripted turn to a slow model with tools."""


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(names: Sequence[str], values: Sequence[str], extra: str = "") -> str:
    pairs = [f'{name}="{_escape(value)}"' for name, value in zip(names, values, strict=True)]
    if extra:
        pairs.append(extra)
    return "{" + ",".join(pairs) + "}" if pairs else ""


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(int(value)) if float(value).is_integer() else repr(value)


@dataclass(slots=True)
class Counter:
    """A value that only goes up (runs finished, evictions)."""

    name: str
    help: str
    label_names: tuple[str, ...] = ()
    values: dict[tuple[str, ...], float] = field(default_factory=dict)

    def inc(self, *labels: str, amount: float = 1.0) -> None:
        """Add `amount` to the series of `labels`."""
        self.values[labels] = self.values.get(labels, 0.0) + amount

    def render(self) -> list[str]:
        """The series as exposition lines."""
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} counter"]
        for labels, value in sorted(self.values.items()):
            lines.append(f"{self.name}{_labels(self.label_names, labels)} {_number(value)}")
        return lines


@dataclass(slots=True)
class Gauge:
    """A value that goes up and down; `read` (if set) computes it when scraped."""

    name: str
    help: str
    read: Callable[[], float] | None = None
    value: float = 0.0

    def inc(self, amount: float = 1.0) -> None:
        """Add `amount`."""
        self.value += amount

    def dec(self, amount: float = 1.0) -> None:
        """Subtract `amount`."""
        self.value -= amount

    def render(self) -> list[str]:
        """The gauge as exposition lines."""
        value = self.read() if self.read is not None else self.value
        return [
            f"# HELP {self.name} {self.help}",
            f"# TYPE {self.name} gauge",
            f"{self.name} {_number(value)}",
        ]


@dataclass(slots=True)
class _Series:
    counts: list[int]
    total: float = 0.0
    count: int = 0


@dataclass(slots=True)
class Histogram:
    """Observed durations in cumulative buckets, as Prometheus expects."""

    name: str
    help: str
    label_names: tuple[str, ...] = ()
    buckets: tuple[float, ...] = LATENCY_BUCKETS
    series: dict[tuple[str, ...], _Series] = field(default_factory=dict)

    def observe(self, value: float, *labels: str) -> None:
        """Record one observation in the series of `labels`."""
        series = self.series.get(labels)
        if series is None:
            series = self.series[labels] = _Series(counts=[0] * len(self.buckets))
        for index, bound in enumerate(self.buckets):
            if value <= bound:
                series.counts[index] += 1
        series.total += value
        series.count += 1

    def render(self) -> list[str]:
        """The histogram as exposition lines (buckets, sum and count per series)."""
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram"]
        for labels, series in sorted(self.series.items()):
            for bound, count in zip(self.buckets, series.counts, strict=True):
                le = _labels(self.label_names, labels, f'le="{_number(bound)}"')
                lines.append(f"{self.name}_bucket{le} {count}")
            inf = _labels(self.label_names, labels, 'le="+Inf"')
            lines.append(f"{self.name}_bucket{inf} {series.count}")
            plain = _labels(self.label_names, labels)
            lines.append(f"{self.name}_sum{plain} {_number(series.total)}")
            lines.append(f"{self.name}_count{plain} {series.count}")
        return lines


Metric = Counter | Gauge | Histogram


class MetricsRegistry:
    """The metrics of one app, rendered in registration order."""

    def __init__(self) -> None:
        self._metrics: list[Metric] = []

    def register(self, metric: Metric) -> None:
        """Add `metric` to what `render` shows."""
        self._metrics.append(metric)

    def render(self) -> str:
        """The Prometheus text exposition (version 0.0.4) of every metric."""
        lines: list[str] = []
        for metric in self._metrics:
            lines.extend(metric.render())
        return "\n".join(lines) + "\n"


class ServerMetrics:
    """The series an agentkeel server keeps; the server updates them as runs go."""

    def __init__(self) -> None:
        self.registry = MetricsRegistry()
        self.runs = Counter(
            "agentkeel_runs_total",
            "Run segments that ended, by agent and status.",
            ("agent", "status"),
        )
        self.turn_seconds = Histogram(
            "agentkeel_turn_duration_seconds",
            "Time from a turn's start to its done frame.",
            ("agent",),
        )
        self.first_token_seconds = Histogram(
            "agentkeel_time_to_first_token_seconds",
            "Time from a turn's start to its first token.",
            ("agent",),
        )
        self.tool_calls = Counter(
            "agentkeel_tool_calls_total",
            "Tool executions, by agent, tool and status.",
            ("agent", "tool", "status"),
        )
        self.tokens = Counter(
            "agentkeel_tokens_total",
            "Model tokens, by agent and kind (input, output, cached, reasoning).",
            ("agent", "kind"),
        )
        self.cached_contexts = Gauge(
            "agentkeel_cached_contexts", "Agents held in the context cache."
        )
        self.queued_turns = Gauge(
            "agentkeel_queued_turns", "Turns waiting for their context's running turn."
        )
        self.active_runs = Gauge("agentkeel_active_runs", "Turns running now.")
        self.evictions = Counter(
            "agentkeel_context_evictions_total", "Contexts evicted from the cache."
        )
        self.swept = Counter(
            "agentkeel_retention_swept_total",
            "What the retention sweeper deleted, by kind (runs, frames, sessions).",
            ("kind",),
        )
        self.refusals = Counter(
            "agentkeel_limit_refusals_total",
            "Requests refused or dropped under server.limits, by reason.",
            ("reason",),
        )
        self.cancels = Counter(
            "agentkeel_cancels_total",
            "Runs stopped on the server, by agent and why: cancel (the endpoint, or an "
            "abandoned interrupt), interrupt or rollback (a turn that took the context over).",
            ("agent", "reason"),
        )
        self.forks = Counter(
            "agentkeel_context_forks_total", "Conversations forked, by agent.", ("agent",)
        )
        self.edits = Counter(
            "agentkeel_history_edits_total",
            "Turns that cut the history, by agent and kind (replace, regenerate).",
            ("agent", "kind"),
        )
        for metric in (
            self.forks,
            self.edits,
            self.swept,
            self.refusals,
            self.cancels,
            self.runs,
            self.turn_seconds,
            self.first_token_seconds,
            self.tool_calls,
            self.tokens,
            self.cached_contexts,
            self.queued_turns,
            self.active_runs,
            self.evictions,
        ):
            self.registry.register(metric)

    def render(self) -> str:
        """The Prometheus text of every series."""
        return self.registry.render()
