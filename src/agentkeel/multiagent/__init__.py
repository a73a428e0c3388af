"""Multi-agent topologies: a Swarm of agents that hand a conversation to each other.

`Swarm` runs one member at a time; members hand off with the injected
``handoff_to_agent`` tool and share a `SharedState` that never reaches a model or a
client. `SwarmSession` persists the swarm and its members (its module documents the
session ids), `SwarmLimits` bounds a run, and `SwarmResult` is what a run returns.
"""

from agentkeel.multiagent.handoff import HANDOFF_TOOL
from agentkeel.multiagent.loop import SwarmLimits
from agentkeel.multiagent.result import HandoffRecord, SwarmResult
from agentkeel.multiagent.session import SwarmSession
from agentkeel.multiagent.swarm import Swarm, SwarmStreamItem

__all__ = [
    "HANDOFF_TOOL",
    "HandoffRecord",
    "Swarm",
    "SwarmLimits",
    "SwarmResult",
    "SwarmSession",
    "SwarmStreamItem",
]
