"""Built-in tools: the clock and the seed's read_state/write_state pair."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from agentkeel.messages import JSONValue
from agentkeel.state import AgentState
from agentkeel.tools.decorator import tool

__all__ = ["current_time", "read_state", "write_state"]


@tool
def current_time(timezone: str = "UTC") -> str:
    """Return the current date and time in ISO 8601.

    Args:
        timezone: An IANA time zone name such as "Europe/Oslo".
    """
    try:
        zone = ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {timezone!r}") from None
    return datetime.now(UTC).astimezone(zone).isoformat(timespec="seconds")


@tool
def write_state(key: str, value: JSONValue, state: AgentState) -> str:
    """Remember a value under a key in the agent's state; it survives restarts.

    Args:
        key: The name to store the value under.
        value: Any JSON value.
        state: The agent's state (injected, never shown to the model).
    """
    state.set(key, value)
    return f"stored {key}"


@tool
def read_state(key: str, state: AgentState) -> JSONValue:
    """Read a value remembered earlier with write_state (null when absent).

    Args:
        key: The name the value was stored under.
        state: The agent's state (injected, never shown to the model).
    """
    return state.get(key)
