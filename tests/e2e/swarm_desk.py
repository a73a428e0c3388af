"""A two-member swarm for the conversation tests, ``e2e.swarm_desk:desk`` in framework.json.

Both members run the same script: ``to <member> <text>`` hands off with ``<text>``,
``pause <seconds>`` runs the slow tool, anything else is answered with every prompt the
member remembers (``front heard: a|b``), so a test reads a member's memory off its answer.
"""

from __future__ import annotations

from collections.abc import Callable

from agentkeel import Agent, ScriptedModel, ScriptedToolCall, ScriptedTurn
from agentkeel.messages import JSONObject
from agentkeel.models.base import ModelRequest
from agentkeel.multiagent import Swarm
from e2e import pause


def _brain(name: str) -> Callable[[ModelRequest], ScriptedTurn]:
    def brain(request: ModelRequest) -> ScriptedTurn:
        last = request.messages[-1]
        if last.tool_results:
            return ScriptedTurn(text=f"{name}: {last.tool_results[0].name} done")
        words = last.text.split()
        if len(words) > 2 and words[0] == "to" and words[1] != name:
            handoff: JSONObject = {"name": words[1], "message": " ".join(words[2:])}
            return ScriptedTurn(tool_calls=[ScriptedToolCall("handoff_to_agent", handoff)])
        if len(words) > 1 and words[0] == "pause":
            return ScriptedTurn(
                tool_calls=[ScriptedToolCall("pause", {"seconds": float(words[1])})]
            )
        prompts = [m.text for m in request.messages if m.role == "user" and not m.tool_results]
        return ScriptedTurn(text=f"{name} heard: " + "|".join(prompts))

    return brain


def desk(context_id: str) -> Swarm:
    """A new swarm for one context: ``front`` answers first, ``back`` when handed to."""
    del context_id
    members = [
        Agent(ScriptedModel([_brain(name)], repeat=True), tools=[pause], name=name)
        for name in ("front", "back")
    ]
    return Swarm(members, entry="front", name="desk", description="A two-member test desk")
