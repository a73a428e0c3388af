"""DemoModel through a real Agent with the demo tools: no mocks, every feature."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import datetime

import pytest

from agentkeel.agent import Agent, StreamItem
from agentkeel.errors import ConfigurationError
from agentkeel.events import (
    InterruptEvent,
    RunEvent,
    StatusEvent,
    StepEvent,
    ThinkingEvent,
    TokenEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from agentkeel.interrupts import Approve, InputAnswer, Reject
from agentkeel.messages import Message, ToolResultPart
from agentkeel.models.base import (
    Finish,
    ModelChunk,
    ModelRequest,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
)
from agentkeel.models.demo import DemoModel
from agentkeel.models.registry import model_from_config
from agentkeel.multiagent import Swarm
from agentkeel.result import AgentResult
from agentkeel.tools.builtin import current_time, read_state, write_state
from agentkeel.tools.demo import DEMO_TOOLS, ask_user, delete_file, demo_agent


def make_agent() -> Agent:
    return demo_agent(token_delay=0)


async def collect(agent: Agent, prompt: str) -> tuple[list[RunEvent], AgentResult]:
    return await drain(agent.stream(prompt))


async def drain(stream: AsyncIterator[StreamItem]) -> tuple[list[RunEvent], AgentResult]:
    events: list[RunEvent] = []
    result: AgentResult | None = None
    async for item in stream:
        if isinstance(item, AgentResult):
            result = item
        else:
            events.append(item)
    assert result is not None
    return events, result


def tool_calls(agent: Agent) -> list[tuple[str, str, object]]:
    return [
        (call.id, call.name, call.input)
        for message in agent.messages
        for call in message.tool_calls
    ]


async def model_chunks(model: DemoModel, request: ModelRequest) -> list[ModelChunk]:
    return [chunk async for chunk in model.stream(request)]


# -- the time -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_time_question_calls_current_time_and_answers_with_it() -> None:
    agent = make_agent()
    events, result = await collect(agent, "What time is it?")

    assert result.status == "completed"
    assert result.tool_names == ["current_time"]
    record = result.tool_calls[0]
    assert record.input == {}
    assert record.status == "success"
    assert isinstance(record.output, str)
    assert result.text == f"It is {record.output}."
    datetime.fromisoformat(record.output)
    assert [type(e) for e in events if isinstance(e, ToolCallEvent | ToolResultEvent)] == [
        ToolCallEvent,
        ToolResultEvent,
    ]
    assert [e.step for e in events if isinstance(e, StepEvent)] == [1, 2]
    assert result.stop_reason == "end_turn"


@pytest.mark.anyio
async def test_a_time_zone_in_the_question_is_passed_to_the_tool() -> None:
    agent = make_agent()
    result = await agent.invoke_async("What's the time in europe/oslo right now?")

    assert result.tool_calls[0].input == {"timezone": "Europe/Oslo"}
    assert result.tool_calls[0].status == "success"
    output = result.tool_calls[0].output
    assert isinstance(output, str)
    assert re.search(r"[+-]0[12]:00$", output)
    assert output in result.text


@pytest.mark.anyio
async def test_an_unknown_time_zone_becomes_an_apology_not_a_failure() -> None:
    agent = make_agent()
    result = await agent.invoke_async("What is the date in Europe/Atlantis?")

    assert result.status == "completed"
    assert result.tool_calls[0].status == "error"
    assert result.text.startswith("I could not read the clock: ")


# -- memory ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_remember_then_recall_reads_the_value_back_from_agent_state() -> None:
    agent = make_agent()
    first = await agent.invoke_async("Remember that my favourite colour is blue")

    assert first.tool_calls[0].name == "write_state"
    assert first.tool_calls[0].input == {"key": "favourite colour", "value": "blue"}
    assert first.text == "I'll remember that your favourite colour is blue."
    assert agent.state.get("favourite colour") == "blue"

    second = await agent.invoke_async("What is my favourite colour?")

    assert second.tool_calls[0].name == "read_state"
    assert second.tool_calls[0].input == {"key": "favourite colour"}
    assert second.tool_calls[0].output == "blue"
    assert second.text == "You told me your favourite colour is blue."


@pytest.mark.anyio
async def test_recall_reads_state_not_the_history() -> None:
    agent = make_agent()
    agent.state.set("favourite colour", "green")

    result = await agent.invoke_async("What did I tell you about my favourite colour?")

    assert result.tool_calls[0].input == {"key": "favourite colour"}
    assert result.text == "You told me your favourite colour is green."


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("prompt", "key", "value"),
    [
        ("My name is Ada.", "name", "Ada"),
        ("remember the meeting date is Friday!", "meeting date", "Friday"),
        (
            "Please REMEMBER that my  Favourite   Colour is Deep Blue",
            "favourite colour",
            "Deep Blue",
        ),
    ],
)
async def test_memory_keys_are_normalized(prompt: str, key: str, value: str) -> None:
    agent = make_agent()
    result = await agent.invoke_async(prompt)

    assert result.tool_calls[0].name == "write_state"
    assert agent.state.to_dict() == {key: value}


@pytest.mark.anyio
async def test_what_did_i_tell_you_recalls_the_last_remembered_key() -> None:
    agent = make_agent()
    await agent.invoke_async("My name is Ada")
    await agent.invoke_async("Remember that my favourite colour is blue")

    result = await agent.invoke_async("What did I tell you?")

    assert result.tool_calls[0].input == {"key": "favourite colour"}
    assert result.text == "You told me your favourite colour is blue."
    recalled = await agent.invoke_async("recall name")
    assert recalled.text == "You told me your name is Ada."


@pytest.mark.anyio
async def test_recalling_something_never_told_says_so() -> None:
    agent = make_agent()
    unknown = await agent.invoke_async("What is my shoe size?")
    assert unknown.tool_calls[0].output is None
    assert unknown.text == "You haven't told me your shoe size yet."

    nothing = await agent.invoke_async("What did I tell you?")
    assert nothing.tool_calls == ()
    assert "haven't asked me to remember anything" in nothing.text


# -- approval -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_delete_suspends_for_approval_and_approving_runs_the_tool() -> None:
    agent = make_agent()
    events, suspended = await collect(agent, "Delete notes.txt")

    assert suspended.status == "suspended"
    interrupt = suspended.interrupt
    assert interrupt is not None
    assert (interrupt.kind, interrupt.tool, interrupt.tool_input) == (
        "approval",
        "delete_file",
        {"path": "notes.txt"},
    )
    assert agent.pending_interrupts == (interrupt,)
    assert not any(isinstance(e, ToolCallEvent) for e in events)
    assert isinstance(events[-1], InterruptEvent)
    assert events[-1].id == interrupt.id

    resumed_events, done = await drain(agent.resume_stream(interrupt.id, Approve()))

    assert done.status == "completed"
    assert done.run_id == suspended.run_id
    assert done.tool_names == ["delete_file"]
    assert done.tool_calls[0].output == "deleted notes.txt (demo: nothing was really deleted)"
    assert done.text == "Done: deleted notes.txt (demo: nothing was really deleted)."
    assert [(type(e), e.name) for e in resumed_events if isinstance(e, ToolCallEvent)] == [
        (ToolCallEvent, "delete_file")
    ]
    assert not agent.pending_interrupts


@pytest.mark.anyio
async def test_rejecting_the_delete_answers_that_nothing_was_deleted() -> None:
    agent = make_agent()
    suspended = await agent.invoke_async("please delete the file notes.txt.")
    assert suspended.interrupt is not None
    assert suspended.interrupt.tool_input == {"path": "notes.txt"}

    done = await agent.resume_async(suspended.interrupt.id, Reject("I still need it"))

    assert done.status == "completed"
    assert done.tool_names == []
    assert done.tool_calls[0].status == "rejected"
    assert done.text == "OK, I did not delete notes.txt. Reason: I still need it."


# -- input ----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_ask_me_suspends_for_input_and_the_answer_comes_back() -> None:
    agent = make_agent()
    events, suspended = await collect(agent, "Ask me about my weekend")

    interrupt = suspended.interrupt
    assert suspended.status == "suspended"
    assert interrupt is not None
    assert (interrupt.kind, interrupt.tool) == ("input", "ask_user")
    assert interrupt.prompt == "What can you tell me about your weekend?"
    assert any(isinstance(e, ToolCallEvent) and e.name == "ask_user" for e in events)

    done = await agent.resume_async(interrupt.id, InputAnswer("I went sailing"))

    assert done.status == "completed"
    assert done.tool_calls[0].output == "I went sailing"
    assert done.text == "Thanks! You told me: I went sailing."


@pytest.mark.anyio
async def test_naming_question_uses_the_answer_as_the_name() -> None:
    agent = make_agent()
    suspended = await agent.invoke_async("What should I name my dog?")
    assert suspended.interrupt is not None
    assert suspended.interrupt.prompt == "What would you like to name your dog?"

    done = await agent.resume_async(suspended.interrupt.id, InputAnswer("Rex"))

    assert done.text == "Then your dog shall be called Rex."


@pytest.mark.anyio
async def test_a_non_text_answer_is_returned_as_json_text() -> None:
    agent = make_agent()
    suspended = await agent.invoke_async("ask me a question")
    assert suspended.interrupt is not None
    assert suspended.interrupt.prompt == "What would you like me to know?"

    done = await agent.resume_async(suspended.interrupt.id, InputAnswer({"n": 3}))

    assert done.tool_calls[0].output == '{"n": 3}'


# -- streaming, fallbacks, determinism -----------------------------------------------


@pytest.mark.anyio
async def test_thinking_comes_first_and_text_streams_in_several_tokens() -> None:
    agent = make_agent()
    events, result = await collect(agent, "hello there")

    kinds = [type(e) for e in events]
    assert kinds[:2] == [StatusEvent, StepEvent]
    assert kinds[2] is ThinkingEvent
    thinking = [e for e in events if isinstance(e, ThinkingEvent)]
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    assert len(thinking) > 3
    assert len(tokens) > 10
    assert kinds.index(TokenEvent) > max(i for i, k in enumerate(kinds) if k is ThinkingEvent)
    assert "".join(t.text for t in tokens) == result.text
    assert result.text.startswith('You said: "hello there".')
    assert "remember" in result.text
    assert result.tool_calls == ()
    assistant = result.messages[-1]
    assert assistant.parts[0].kind == "thinking"


@pytest.mark.anyio
async def test_tools_not_offered_are_never_requested() -> None:
    agent = Agent(DemoModel(token_delay=0), tools=[read_state, write_state])
    result = await agent.invoke_async("What time is it?")

    assert result.status == "completed"
    assert result.tool_calls == ()
    assert "current_time" in result.text
    deleting = await agent.invoke_async("Delete notes.txt")
    assert deleting.status == "completed"
    assert deleting.tool_calls == ()


@pytest.mark.anyio
async def test_same_conversation_gives_the_same_events() -> None:
    script = [
        "Remember that my favourite colour is blue",
        "What is my favourite colour?",
        "hello",
    ]

    async def run() -> tuple[list[list[RunEvent]], list[str]]:
        agent = make_agent()
        transcript = []
        for prompt in script:
            events, _ = await collect(agent, prompt)
            transcript.append(events)
        return transcript, [call[0] for call in tool_calls(agent)]

    first, first_ids = await run()
    second, second_ids = await run()

    assert first == second
    assert first_ids == second_ids == ["call-demo-1", "call-demo-5"]


@pytest.mark.anyio
async def test_the_model_streams_deterministic_chunks_and_counts_words() -> None:
    model = DemoModel(token_delay=0)
    request = ModelRequest(
        messages=(Message.user("What time is it?"),),
        system_prompt="be brief",
        tools=tuple(t.spec for t in DEMO_TOOLS),
    )

    chunks = await model_chunks(model, request)

    assert chunks == await model_chunks(model, request)
    assert model.name == "demo"
    assert isinstance(chunks[0], ThinkingDelta)
    calls = [c for c in chunks if isinstance(c, ToolCallDelta)]
    assert calls[0].id == "call-demo-1"
    assert calls[0].name == "current_time"
    assert "".join(c.arguments for c in calls) == "{}"
    finish = chunks[-1]
    assert isinstance(finish, Finish)
    assert finish.stop_reason == "tool_use"
    thinking = "".join(c.text for c in chunks if isinstance(c, ThinkingDelta))
    assert finish.usage.input_tokens == 2 + 4
    assert finish.usage.output_tokens == len(thinking.split()) + 1
    assert not any(isinstance(c, TextDelta) for c in chunks)


@pytest.mark.anyio
async def test_answers_from_results_of_any_tool() -> None:
    model = DemoModel(token_delay=0)
    request = ModelRequest(
        messages=(
            Message.user("hi"),
            Message(
                role="user",
                parts=(ToolResultPart(call_id="c1", name="weather", content={"temp": 21}),),
            ),
        )
    )

    text = "".join(c.text for c in await model_chunks(model, request) if isinstance(c, TextDelta))

    assert text == 'The weather tool returned: {"temp": 21}.'


@pytest.mark.anyio
async def test_token_delay_paces_the_stream() -> None:
    model = DemoModel(token_delay=0.001)
    request = ModelRequest(messages=(Message.user("hi"),))
    assert len(await model_chunks(model, request)) > 5


def test_the_demo_model_is_configurable_and_checks_its_delay() -> None:
    assert model_from_config("demo").name == "demo"
    with pytest.raises(ConfigurationError):
        DemoModel(token_delay=-1)


def test_demo_tools_and_agent() -> None:
    assert [t.name for t in DEMO_TOOLS] == [
        "current_time",
        "read_state",
        "write_state",
        "delete_file",
        "ask_user",
    ]
    assert DEMO_TOOLS[0] is current_time
    assert delete_file.requires_approval
    assert not ask_user.requires_approval
    agent = demo_agent(name="other", state={"a": 1})
    assert agent.name == "other"
    assert agent.state.get("a") == 1
    assert agent.model.name == "demo"
    assert set(agent.tools) == {t.name for t in DEMO_TOOLS}
    assert demo_agent().description


@pytest.mark.anyio
async def test_a_swarm_member_routes_by_the_rules_in_its_system_prompt() -> None:
    triage = Agent(
        DemoModel(token_delay=0),
        name="triage",
        system_prompt="You are the triage desk. Routes: time -> clock, remember -> memory.",
    )
    clock = Agent(DemoModel(token_delay=0), name="clock", tools=[current_time])
    memory = Agent(DemoModel(token_delay=0), name="memory", tools=[write_state])
    swarm = Swarm([triage, clock, memory])
    timed = await swarm.invoke_async("What time is it?")
    assert [(h.from_agent, h.to_agent) for h in timed.handoffs] == [("triage", "clock")]
    assert timed.text.startswith("It is ")
    chat = await Swarm(
        [Agent(DemoModel(token_delay=0), name="solo", system_prompt="Routes: time -> x")]
    ).invoke_async("hello")
    assert chat.handoffs == () and chat.text.startswith('You said: "hello".')
