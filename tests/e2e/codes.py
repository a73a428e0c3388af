"""Factories that fail on purpose, for the test that drives a server to every error code."""

from __future__ import annotations

from agentkeel import Agent, RunLimits, ScriptedModel, ScriptedToolCall, ScriptedTurn, tool
from agentkeel.definitions import CATALOG_CONTEXT_ID
from agentkeel.errors import ConfigurationError, ContextRefusedError
from e2e.typed import Weather

__all__ = ["broken", "looping", "misconfigured", "refusing", "shared", "untyped"]

_ONE = Agent(ScriptedModel(["hello"], repeat=True), name="shared")


def _not_at_start(context_id: str) -> None:
    """Refuse the catalog probe at start, so that the failure is met by a request."""
    if context_id == CATALOG_CONTEXT_ID:
        raise ContextRefusedError("no catalog")


def refusing(context_id: str) -> Agent:
    """Refuses every context, as a factory that checks who may use a context would."""
    raise ContextRefusedError(f"context {context_id} belongs to someone else")


def shared(context_id: str) -> Agent:
    """Returns one Agent for every context: the server must refuse the second."""
    _not_at_start(context_id)
    return _ONE


def broken(context_id: str) -> Agent:
    """Fails as a bug would; what it says must not reach the client."""
    _not_at_start(context_id)
    raise RuntimeError(f"bug while building {context_id} at /srv/secret/path")


def misconfigured(context_id: str) -> Agent:
    """Fails as a factory whose own settings are wrong."""
    _not_at_start(context_id)
    raise ConfigurationError(f"/etc/app/{context_id}.toml: no such section")


@tool
def noop() -> str:
    """Does nothing, so that a model can keep calling it."""
    return "done"


def looping(context_id: str) -> Agent:
    """Calls a tool at every step, with a budget of one step."""
    del context_id
    turn = ScriptedTurn(tool_calls=[ScriptedToolCall("noop", {})])
    return Agent(ScriptedModel([turn], repeat=True), tools=[noop], limits=RunLimits(max_steps=1))


def untyped(context_id: str) -> Agent:
    """Never answers in the declared output type, and gets no retry."""
    del context_id
    model = ScriptedModel(["not the weather"], repeat=True)
    return Agent(model, output_type=Weather, output_retries=0, name="untyped")
