"""Swarm suspension and sessions in one process: approvals, rejections, restore, delete."""

from __future__ import annotations

import pytest

from agentkeel import (
    Agent,
    AgentState,
    Approve,
    CancelRun,
    ConfigurationError,
    InMemoryCheckpointer,
    InputAnswer,
    InterruptEvent,
    InterruptNotFoundError,
    InterruptPendingError,
    InvalidRequestError,
    Reject,
    ScriptedModel,
    ScriptedToolCall,
    ScriptedTurn,
    SharedState,
    tool,
)
from agentkeel.events import RunEvent
from agentkeel.hooks import BeforeRunEvent
from agentkeel.messages import JSONObject
from agentkeel.multiagent import HANDOFF_TOOL, Swarm, SwarmResult, SwarmSession
from agentkeel.storage import InMemoryStorage
from agentkeel.storage.base import SessionKey

refunds: list[str] = []


@tool
def note_order(order_id: str, shared: SharedState, state: AgentState) -> str:
    """Note the order id for the team."""
    shared.set("order", order_id)
    state.set("routed", order_id)
    return "noted"


@tool(requires_approval=True)
def refund(amount: int, shared: SharedState) -> str:
    """Refund the customer (needs a human's approval)."""
    refunds.append(f"{shared.get('order')}:{amount}")
    shared.set("refunded", amount)
    return f"refunded {amount}"


@pytest.fixture(autouse=True)
def _reset() -> None:
    refunds.clear()


def handoff(to: str, message: str, context: JSONObject | None = None) -> ScriptedToolCall:
    arguments: JSONObject = {"name": to, "message": message}
    if context is not None:
        arguments["context"] = context
    return ScriptedToolCall(HANDOFF_TOOL, arguments)


def turn(*calls: ScriptedToolCall) -> ScriptedTurn:
    return ScriptedTurn(tool_calls=list(calls))


def model_of(agent: Agent) -> ScriptedModel:
    model = agent.model
    assert isinstance(model, ScriptedModel)
    return model


def build(
    billing_turns: list[ScriptedTurn | str],
    triage_after: list[ScriptedTurn | str] | None = None,
    session: SwarmSession | None = None,
    *,
    restored: bool = False,
) -> Swarm:
    """Triage notes the order and hands to billing (turns a restored swarm does not replay)."""
    first: list[ScriptedTurn | str] = [
        turn(ScriptedToolCall("note_order", {"order_id": "A-17"})),
        turn(handoff("billing", "Refund 30 for order A-17.")),
    ]
    triage = Agent(
        ScriptedModel([*([] if restored else first), *(triage_after or [])]),
        name="triage",
        tools=[note_order],
    )
    billing = Agent(ScriptedModel(billing_turns), name="billing", tools=[refund])
    return Swarm([triage, billing], name="support", session=session)


async def suspend(swarm: Swarm, events: list[RunEvent] | None = None) -> SwarmResult:
    sink = events if events is not None else []
    result = await swarm.invoke_async("I want a refund for A-17", on_event=sink.append)
    assert result.status == "suspended"
    return result


@pytest.mark.anyio
async def test_an_approval_in_a_member_suspends_the_whole_swarm() -> None:
    swarm = build([turn(ScriptedToolCall("refund", {"amount": 30}))])
    events: list[RunEvent] = []
    result = await suspend(swarm, events)
    interrupt = result.interrupt
    assert interrupt is not None and interrupt.tool == "refund" and interrupt.kind == "approval"
    assert result.agent == "billing" and result.interrupts == swarm.pending_interrupts
    assert [h.to_agent for h in result.handoffs] == ["billing"]
    assert refunds == []
    last = events[-1]
    assert isinstance(last, InterruptEvent) and last.agent == "billing"
    assert last.id == interrupt.id
    with pytest.raises(InterruptPendingError) as info:
        await swarm.invoke_async("hello?")
    assert info.value.interrupt_id == interrupt.id


@pytest.mark.anyio
async def test_approve_resumes_in_that_member_and_a_later_handoff_works() -> None:
    swarm = build(
        [
            turn(ScriptedToolCall("refund", {"amount": 30})),
            turn(handoff("triage", "Refund done; close the ticket.", {"refund": 30})),
        ],
        triage_after=["Your refund of 30 is on its way."],
    )
    suspended = await suspend(swarm)
    assert suspended.interrupt is not None
    started: list[tuple[str, bool]] = []
    swarm.hooks.add_callback(
        BeforeRunEvent, lambda event: started.append((event.context.run_id, event.resumed))
    )
    events: list[RunEvent] = []
    done = await swarm.resume_async(suspended.interrupt.id, Approve(), on_event=events.append)

    assert done.status == "completed" and done.text == "Your refund of 30 is on its way."
    assert done.run_id == suspended.run_id and started == [(suspended.run_id, True)]
    assert refunds == ["A-17:30"]
    assert [(h.from_agent, h.to_agent) for h in done.handoffs] == [
        ("triage", "billing"),
        ("billing", "triage"),
    ]
    assert done.tool_names == ["note_order", HANDOFF_TOOL, "refund", HANDOFF_TOOL]
    assert done.shared_context == {"order": "A-17", "refunded": 30}
    assert swarm.pending_interrupts == () and swarm.active == "triage"
    assert {event.agent for event in events} == {"billing", "triage"}
    # the billing member run that suspended was resumed, not started again
    billing_runs = [r for r in done.results if r.agent == "billing"]
    assert len(billing_runs) == 1 and billing_runs[0].status == "completed"
    assert billing_runs[0].run_id == suspended.results[-1].run_id
    triage_prompt = model_of(swarm.members["triage"]).requests[-1].messages[-1].text
    assert triage_prompt.startswith("Refund done; close the ticket.")


@pytest.mark.anyio
async def test_reject_reaches_the_member_model_as_an_error_result() -> None:
    swarm = build([turn(ScriptedToolCall("refund", {"amount": 30})), "No refund, then."])
    suspended = await suspend(swarm)
    assert suspended.interrupt is not None
    done = await swarm.resume_async(suspended.interrupt.id, Reject("over the limit"))
    assert done.status == "completed" and done.text == "No refund, then." and refunds == []
    assert "refund" not in done.tool_names
    sent = model_of(swarm.members["billing"]).requests[-1].messages[-1]
    assert [(r.content, r.status) for r in sent.tool_results] == [
        ("rejected: over the limit", "error")
    ]


@pytest.mark.anyio
async def test_a_wrong_decision_or_an_unknown_interrupt_changes_nothing() -> None:
    swarm = build([turn(ScriptedToolCall("refund", {"amount": 30})), "Refunded."])
    suspended = await suspend(swarm)
    assert suspended.interrupt is not None
    with pytest.raises(InterruptNotFoundError):
        await swarm.resume_async("int-forged", Approve())
    with pytest.raises(InvalidRequestError):
        await swarm.resume_async(suspended.interrupt.id, InputAnswer("yes"))
    assert swarm.pending_interrupts == suspended.interrupts and refunds == []
    done = await swarm.resume_async(suspended.interrupt.id, Approve())
    assert done.status == "completed" and refunds == ["A-17:30"]
    with pytest.raises(InterruptNotFoundError):
        await swarm.resume_async(suspended.interrupt.id, Approve())


@pytest.mark.anyio
async def test_cancelling_the_suspended_run_ends_the_swarm_run_cancelled() -> None:
    swarm = build([turn(ScriptedToolCall("refund", {"amount": 30})), "Anything else?"])
    suspended = await suspend(swarm)
    assert suspended.interrupt is not None
    done = await swarm.resume_async(suspended.interrupt.id, CancelRun())
    assert done.status == "cancelled" and refunds == [] and swarm.pending_interrupts == ()
    billing = swarm.members["billing"]
    assert billing.messages[-1].tool_results[0].status == "error"  # history stays valid
    again = await swarm.invoke_async("Never mind.")
    assert again.status == "completed" and again.text == "Anything else?"


@pytest.mark.anyio
async def test_a_handoff_in_the_same_step_as_an_approval_happens_after_the_resume() -> None:
    swarm = build(
        [
            turn(
                ScriptedToolCall("refund", {"amount": 30}),
                handoff("triage", "Tell them it is being refunded."),
            )
        ],  # no second billing turn: after the resume, billing must not call its model
        triage_after=["It is being refunded."],
    )
    suspended = await suspend(swarm)
    assert suspended.interrupt is not None
    done = await swarm.resume_async(suspended.interrupt.id, Approve())
    assert done.status == "completed" and done.text == "It is being refunded."
    assert [h.to_agent for h in done.handoffs] == ["billing", "triage"]
    assert refunds == ["A-17:30"]
    assert len(model_of(swarm.members["billing"]).requests) == 1


@pytest.mark.anyio
async def test_stream_and_resume_stream() -> None:
    swarm = build([turn(ScriptedToolCall("refund", {"amount": 30})), "Refunded."])
    items = [item async for item in swarm.stream("I want a refund")]
    suspended = items[-1]
    assert isinstance(suspended, SwarmResult) and suspended.interrupt is not None
    assert isinstance(items[-2], InterruptEvent)
    resumed = [item async for item in swarm.resume_stream(suspended.interrupt.id, Approve())]
    final = resumed[-1]
    assert isinstance(final, SwarmResult) and final.status == "completed"
    assert [item.type for item in resumed[:2]] == ["status", "tool_call"]  # type: ignore[union-attr]


def session_for(storage: InMemoryStorage, checkpointer: InMemoryCheckpointer) -> SwarmSession:
    return SwarmSession("support", "ctx-42", storage, checkpointer)


@pytest.mark.anyio
async def test_a_new_swarm_over_the_same_storage_restores_everything() -> None:
    storage, checkpointer = InMemoryStorage(), InMemoryCheckpointer()
    first = build(
        [turn(ScriptedToolCall("refund", {"amount": 30}))],
        session=session_for(storage, checkpointer),
    )
    suspended = await suspend(first)
    assert suspended.interrupt is not None and suspended.context_id == "ctx-42"

    second = build(
        ["Refund approved and sent."], session=session_for(storage, checkpointer)
    )  # a fresh swarm: fresh Agents, nothing in memory
    await second.restore()
    assert second.pending_interrupts == suspended.interrupts
    assert second.active == "billing" and second.shared_state.get("order") == "A-17"
    assert second.members["triage"].state.get("routed") == "A-17"
    assert [m.role for m in second.members["triage"].messages] == ["user", "assistant"] * 2 + [
        "user"
    ]
    assert second.handoffs == suspended.handoffs
    done = await second.resume_async(suspended.interrupt.id, Approve())
    assert done.status == "completed" and done.run_id == suspended.run_id
    assert done.tool_names == ["note_order", HANDOFF_TOOL, "refund"]
    assert refunds == ["A-17:30"]

    third = build(["You're welcome."], session=session_for(storage, checkpointer))
    await third.restore()
    assert third.pending_interrupts == () and third.active == "billing"
    assert third.shared_state.get("refunded") == 30
    runs = await storage.list_runs(SessionKey(definition="support", context_id="ctx-42"))
    assert [(r.run_id, r.status) for r in runs] == [(suspended.run_id, "completed")]


@pytest.mark.anyio
async def test_a_pending_handoff_survives_a_restore_and_happens_after_the_decision() -> None:
    storage, checkpointer = InMemoryStorage(), InMemoryCheckpointer()
    first = build(
        [
            turn(
                ScriptedToolCall("refund", {"amount": 30}),
                handoff("triage", "Tell them it is being refunded."),
            )
        ],
        session=session_for(storage, checkpointer),
    )
    suspended = await suspend(first)
    assert suspended.interrupt is not None
    second = build(
        [], ["It is being refunded."], session=session_for(storage, checkpointer), restored=True
    )
    done = await second.resume_async(suspended.interrupt.id, Approve())
    assert done.status == "completed" and done.text == "It is being refunded."
    assert [h.to_agent for h in done.handoffs] == ["billing", "triage"]
    assert model_of(second.members["billing"]).requests == []  # ended after the tools
    assert second.active == "triage" and refunds == ["A-17:30"]


def test_a_refused_session_leaves_the_members_untouched() -> None:
    agent = Agent(ScriptedModel([]), name="Not Valid")
    with pytest.raises(ConfigurationError, match="cannot be persisted"):
        Swarm([agent], session=SwarmSession("support", "ctx-1", InMemoryStorage()))
    assert HANDOFF_TOOL not in agent.tools and agent.shared_state is None
    assert Swarm([agent]).members == {"Not Valid": agent}


@pytest.mark.anyio
async def test_member_sessions_follow_the_documented_ids_and_delete_removes_all() -> None:
    storage, checkpointer = InMemoryStorage(), InMemoryCheckpointer()
    session = session_for(storage, checkpointer)
    swarm = build([turn(ScriptedToolCall("refund", {"amount": 30}))], session=session)
    await suspend(swarm)
    triage_key = session.member_key("triage")
    billing_key = session.member_key("billing")
    assert triage_key.session_id == "support--triage:ctx-42"
    assert billing_key.session_id == "support--billing:ctx-42"
    assert await storage.load(triage_key) is not None
    assert await checkpointer.latest(billing_key) is not None
    assert await storage.exists(session.key)  # its record is a document, not a history
    with pytest.raises(ConfigurationError, match="before the swarm's first run"):
        swarm.session = session

    assert await SwarmSession("support", "ctx-42", storage, checkpointer).delete() is True
    for key in (triage_key, billing_key, session.key):
        assert await storage.load(key) is None and not await storage.exists(key)
        assert await checkpointer.latest(key) is None
    assert await SwarmSession("support", "ctx-42", storage, checkpointer).delete() is False
