"""Human in the loop inside one process: approvals, input, several approvals, cancel."""

from __future__ import annotations

import pytest

from agentkeel import (
    Agent,
    Approve,
    CancelRun,
    InputAnswer,
    InterruptEvent,
    InterruptNotFoundError,
    InterruptPendingError,
    InvalidRequestError,
    Reject,
    ScriptedModel,
    ScriptedToolCall,
    ScriptedTurn,
    ToolCallEvent,
    interrupt,
    tool,
)
from agentkeel.messages import Message

deleted: list[str] = []


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file (needs approval)."""
    deleted.append(path)
    return f"deleted {path}"


@tool
def rename(old: str) -> str:
    """Ask the person for a new name, then rename."""
    new = interrupt(f"New name for {old}?")
    again = interrupt("Are you sure? (yes/no)")
    return f"renamed {old} to {new} ({again})"


@tool
def lookup(q: str) -> str:
    """Look something up (no approval)."""
    return f"found {q}"


def tool_results(message: Message) -> list[tuple[str, object, str]]:
    return [(r.name, r.content, r.status) for r in message.tool_results]


@pytest.fixture(autouse=True)
def _reset() -> None:
    deleted.clear()


@pytest.mark.anyio
async def test_approval_suspends_then_approve_runs_the_tool() -> None:
    model = ScriptedModel(
        [ScriptedTurn(tool_calls=[ScriptedToolCall("delete_file", {"path": "a.txt"})]), "Gone."]
    )
    agent = Agent(model, tools=[delete_file])
    items = [item async for item in agent.stream("delete a.txt")]
    result = items[-1]
    events = items[:-1]
    assert result.status == "suspended"  # type: ignore[union-attr]
    pending = result.interrupt  # type: ignore[union-attr]
    assert pending is not None and pending.kind == "approval" and pending.tool == "delete_file"
    assert pending.tool_input == {"path": "a.txt"}
    assert any(isinstance(e, InterruptEvent) and e.id == pending.id for e in events)
    assert not any(isinstance(e, ToolCallEvent) for e in events)
    assert deleted == []
    assert agent.messages == []  # the run's messages wait in the suspended run
    resumed = await agent.resume_async(pending.id, Approve())
    assert resumed.status == "completed" and resumed.text == "Gone."
    assert resumed.run_id == result.run_id  # type: ignore[union-attr]
    assert deleted == ["a.txt"]
    assert resumed.tool_names == ["delete_file"]
    assert [m.role for m in agent.messages] == ["user", "assistant", "user", "assistant"]


@pytest.mark.anyio
async def test_reject_gives_the_model_an_error_result_with_the_reason() -> None:
    model = ScriptedModel(
        [ScriptedTurn(tool_calls=[ScriptedToolCall("delete_file", {"path": "a"})]), "Kept it."]
    )
    agent = Agent(model, tools=[delete_file])
    first = await agent.invoke_async("delete a")
    assert first.interrupt is not None
    done = await agent.resume_async(first.interrupt.id, Reject("not today"))
    assert done.status == "completed"
    assert deleted == []
    assert tool_results(model.requests[1].messages[-1]) == [
        ("delete_file", "rejected: not today", "error")
    ]
    assert done.tool_names == []  # a rejected tool did not run
    assert done.tool_calls[0].status == "rejected"


@pytest.mark.anyio
async def test_approve_list_on_the_agent_gates_a_plain_tool() -> None:
    model = ScriptedModel([ScriptedTurn(tool_calls=[ScriptedToolCall("lookup", {"q": "x"})]), "ok"])
    agent = Agent(model, tools=[lookup], approve=["lookup"])
    first = await agent.invoke_async("look")
    assert first.status == "suspended"


@pytest.mark.anyio
async def test_input_interrupts_return_the_answers_in_order() -> None:
    model = ScriptedModel(
        [ScriptedTurn(tool_calls=[ScriptedToolCall("rename", {"old": "draft"})]), "Renamed."]
    )
    agent = Agent(model, tools=[rename])
    first = await agent.invoke_async("rename draft")
    assert first.interrupt is not None and first.interrupt.kind == "input"
    assert first.interrupt.prompt == "New name for draft?"
    second = await agent.resume_async(first.interrupt.id, InputAnswer("final"))
    assert second.status == "suspended" and second.interrupt is not None
    assert second.interrupt.prompt == "Are you sure? (yes/no)"
    assert second.interrupt.id != first.interrupt.id
    with pytest.raises(InterruptNotFoundError):
        await agent.resume_async(first.interrupt.id, InputAnswer("again"))
    done = await agent.resume_async(second.interrupt.id, InputAnswer("yes"))
    assert done.status == "completed"
    assert done.tool_calls[0].output == "renamed draft to final (yes)"


@pytest.mark.anyio
async def test_several_approvals_in_one_step_with_a_plain_call_beside_them() -> None:
    model = ScriptedModel(
        [
            ScriptedTurn(
                tool_calls=[
                    ScriptedToolCall("delete_file", {"path": "1"}),
                    ScriptedToolCall("lookup", {"q": "docs"}),
                    ScriptedToolCall("delete_file", {"path": "2"}),
                ]
            ),
            "Done both.",
        ]
    )
    agent = Agent(model, tools=[delete_file, lookup])
    first = await agent.invoke_async("clean up")
    assert first.status == "suspended" and len(first.interrupts) == 2
    one, two = first.interrupts
    assert [i.tool_input for i in first.interrupts] == [{"path": "1"}, {"path": "2"}]
    middle = await agent.resume_async(two.id, Reject("keep 2"))
    assert middle.status == "suspended" and [i.id for i in middle.interrupts] == [one.id]
    assert len(model.requests) == 1  # no model call until every decision is in
    done = await agent.resume_async(one.id, Approve())
    assert done.status == "completed"
    assert deleted == ["1"]
    assert tool_results(model.requests[1].messages[-1]) == [
        ("delete_file", "deleted 1", "success"),
        ("lookup", "found docs", "success"),
        ("delete_file", "rejected: keep 2", "error"),
    ]
    assert [r.name for r in done.tool_calls] == ["delete_file", "lookup", "delete_file"]


@pytest.mark.anyio
async def test_cancel_abandons_the_run_and_leaves_valid_history() -> None:
    model = ScriptedModel(
        [ScriptedTurn(tool_calls=[ScriptedToolCall("delete_file", {"path": "a"})]), "Next."]
    )
    agent = Agent(model, tools=[delete_file])
    first = await agent.invoke_async("delete a")
    assert first.interrupt is not None
    cancelled = await agent.resume_async(first.interrupt.id, CancelRun())
    assert cancelled.status == "cancelled"
    assert deleted == []
    assert agent.pending_interrupts == ()
    assert tool_results(agent.messages[-1])[0][2] == "error"
    assert (await agent.invoke_async("next")).text == "Next."


@pytest.mark.anyio
async def test_a_message_while_suspended_is_refused_and_changes_nothing() -> None:
    model = ScriptedModel(
        [ScriptedTurn(tool_calls=[ScriptedToolCall("delete_file", {"path": "a"})])]
    )
    agent = Agent(model, tools=[delete_file])
    first = await agent.invoke_async("delete a")
    assert first.interrupt is not None
    with pytest.raises(InterruptPendingError) as info:
        await agent.invoke_async("something else")
    assert info.value.interrupt_id == first.interrupt.id
    assert agent.pending_interrupts == (first.interrupt,)


@pytest.mark.anyio
async def test_unknown_interrupt_and_wrong_decision_kind_change_nothing() -> None:
    model = ScriptedModel(
        [ScriptedTurn(tool_calls=[ScriptedToolCall("delete_file", {"path": "a"})]), "ok"]
    )
    agent = Agent(model, tools=[delete_file])
    first = await agent.invoke_async("delete a")
    assert first.interrupt is not None
    with pytest.raises(InterruptNotFoundError):
        await agent.resume_async("int-unknown", Approve())
    with pytest.raises(InvalidRequestError):
        await agent.resume_async(first.interrupt.id, InputAnswer("yes"))
    assert agent.pending_interrupts == (first.interrupt,)
    done = await agent.resume_async(first.interrupt.id, Approve())
    assert done.status == "completed"
    with pytest.raises(InterruptNotFoundError):
        await agent.resume_async(first.interrupt.id, Approve())
