"""A separate process that runs one scripted swarm step against the same folders.

The swarm restart tests run it several times: each invocation is a fresh process with
fresh Agents, so whatever it knows came from LocalFileStorage and FileCheckpointer.
Usage:

    python swarm_worker.py MODE DATA_DIR [INTERRUPT_ID]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio

from agentkeel import (
    Agent,
    AgentkeelError,
    AgentState,
    Approve,
    Decision,
    FileCheckpointer,
    LocalFileStorage,
    Reject,
    ScriptedModel,
    ScriptedToolCall,
    ScriptedTurn,
    SharedState,
    tool,
)
from agentkeel.messages import JSONObject, messages_to_json
from agentkeel.multiagent import HANDOFF_TOOL, Swarm, SwarmSession

DATA = Path(sys.argv[2])
SIDE_EFFECTS = DATA / "side-effects.log"


def side_effect(line: str) -> None:
    with SIDE_EFFECTS.open("a", encoding="utf-8") as handle:
        handle.write(line + "\n")


@tool
def note_order(order_id: str, shared: SharedState, state: AgentState) -> str:
    """Note the order for the team."""
    shared.set("order", order_id)
    state.set("routed", order_id)
    return "noted"


@tool(requires_approval=True)
def refund(amount: int, shared: SharedState) -> str:
    """Refund the customer (needs approval)."""
    side_effect(f"refunded {amount} for {shared.get('order')}")
    shared.set("refunded", amount)
    return f"refunded {amount}"


def call(name: str, arguments: JSONObject) -> ScriptedTurn:
    return ScriptedTurn(tool_calls=[ScriptedToolCall(name, arguments)])


SCRIPTS: dict[str, dict[str, list[ScriptedTurn | str]]] = {
    "start": {
        "triage": [
            call("note_order", {"order_id": "A-17"}),
            call(HANDOFF_TOOL, {"name": "billing", "message": "Refund 30 for A-17."}),
        ],
        "billing": [call("refund", {"amount": 30})],
    },
    "approve": {
        "billing": [
            call(
                HANDOFF_TOOL,
                {"name": "triage", "message": "Refund sent.", "context": {"amount": 30}},
            )
        ],
        "triage": ["Your refund of 30 is on its way."],
    },
    "reject": {"billing": ["I cannot refund that, sorry."]},
    "followup": {"triage": ["Anything else about A-17?"], "billing": ["Billing here."]},
}


def build(mode: str) -> Swarm:
    scripts = SCRIPTS.get(mode, {})
    triage = Agent(ScriptedModel(scripts.get("triage", [])), name="triage", tools=[note_order])
    billing = Agent(ScriptedModel(scripts.get("billing", [])), name="billing", tools=[refund])
    session = SwarmSession(
        "support",
        "ctx-swarm",
        LocalFileStorage(DATA / "sessions"),
        FileCheckpointer(DATA / "checkpoints"),
    )
    return Swarm([triage, billing], name="support", session=session)


def requests(agent: Agent) -> list[object]:
    model = agent.model
    assert isinstance(model, ScriptedModel)
    return [messages_to_json(request.messages) for request in model.requests]


async def main() -> None:
    mode = sys.argv[1]
    swarm = build(mode)
    await swarm.restore()
    result = None
    if mode in ("approve", "reject"):
        decision: Decision = Approve() if mode == "approve" else Reject("over the limit")
        try:
            result = await swarm.resume_async(sys.argv[3], decision)
        except AgentkeelError as exc:
            print(json.dumps({"error": exc.code, "pending": len(swarm.pending_interrupts)}))
            return
    elif mode != "inspect":
        result = await swarm.invoke_async("I want a refund for A-17" if mode == "start" else mode)
    report: dict[str, object] = {
        "active": swarm.active,
        "shared": swarm.shared_state.to_dict(),
        "pending": [item.to_json() for item in swarm.pending_interrupts],
        "handoffs": [item.to_json() for item in swarm.handoffs],
        "members": {
            name: {
                "messages": messages_to_json(member.messages),
                "state": member.state.to_dict(),
                "requests": requests(member),
            }
            for name, member in swarm.members.items()
        },
    }
    if result is not None:
        report["result"] = {
            "status": result.status,
            "text": result.text,
            "run_id": result.run_id,
            "agent": result.agent,
            "interrupts": [item.to_json() for item in result.interrupts],
            "tool_names": result.tool_names,
            "handoffs": [item.to_json() for item in result.handoffs],
            "shared_context": result.shared_context,
        }
    print(json.dumps(report))


if __name__ == "__main__":
    anyio.run(main)
