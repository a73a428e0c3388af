"""Swarm in one process: handoffs, shared state, tagged events, limits and failures."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence

import anyio
import pytest

from agentkeel import (
    Agent,
    ConfigurationError,
    ErrorEvent,
    InvalidRequestError,
    InvocationState,
    RunInProgressError,
    ScriptedModel,
    ScriptedToolCall,
    ScriptedTurn,
    SharedState,
    tool,
)
from agentkeel.errors import ModelUnavailableError
from agentkeel.events import RunEvent
from agentkeel.hooks import BeforeRunEvent
from agentkeel.messages import JSONObject, Message, messages_to_json
from agentkeel.models.base import ModelRequest
from agentkeel.multiagent import HANDOFF_TOOL, HandoffRecord, Swarm, SwarmResult, SwarmSession
from agentkeel.storage import InMemoryStorage

SECRET = "s3cr3t-shared-value"
seen: list[str] = []


@tool
def note_order(order_id: str, shared: SharedState) -> str:
    """Note the customer's order id for the team."""
    shared.set("order", order_id)
    shared.set("api_token", SECRET)
    return "noted"


@tool
def lookup_order(shared: SharedState) -> str:
    """Look up the order the team noted."""
    token = shared.get("api_token")
    seen.append(f"{shared.get('order')} token-ok={token == SECRET}")
    return f"order {shared.get('order')} shipped on Monday"


@tool
def flaky(scratch: InvocationState) -> str:
    """A tool whose backend is down."""
    scratch["flaky_calls"] = int(str(scratch.get("flaky_calls", 0))) + 1
    raise RuntimeError("database unreachable")


@pytest.fixture(autouse=True)
def _reset() -> None:
    seen.clear()


def handoff(to: str, message: str, context: JSONObject | None = None) -> ScriptedTurn:
    arguments: JSONObject = {"name": to, "message": message}
    if context is not None:
        arguments["context"] = context
    return ScriptedTurn(tool_calls=[ScriptedToolCall(HANDOFF_TOOL, arguments)])


def call(name: str, arguments: JSONObject | None = None) -> ScriptedTurn:
    return ScriptedTurn(tool_calls=[ScriptedToolCall(name, arguments or {})])


def model_of(agent: Agent) -> ScriptedModel:
    model = agent.model
    assert isinstance(model, ScriptedModel)
    return model


def request_json(request: ModelRequest) -> str:
    return json.dumps(
        {
            "messages": messages_to_json(request.messages),
            "system": request.system_prompt,
            "tools": [dataclasses.asdict(spec) for spec in request.tools],
        }
    )


def last_tool_results(request: ModelRequest) -> list[tuple[str, object, str]]:
    message = request.messages[-1]
    return [(r.name, r.content, r.status) for r in message.tool_results]


def support_swarm(*later: str, **options: object) -> tuple[Swarm, Agent, Agent]:
    triage = Agent(
        ScriptedModel(
            [
                call("note_order", {"order_id": "A-17"}),
                handoff("shipping", "Tell the customer where order A-17 is.", {"tier": "gold"}),
            ]
        ),
        name="triage",
        description="Routes questions",
        tools=[note_order],
    )
    shipping = Agent(
        ScriptedModel([call("lookup_order"), "Order A-17 shipped on Monday.", *later]),
        name="shipping",
        description="Knows where orders are",
        tools=[lookup_order],
    )
    return Swarm([triage, shipping], **options), triage, shipping  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_a_handoff_chain_shares_state_between_members() -> None:
    swarm, triage, shipping = support_swarm()
    result = await swarm.invoke_async("Where is my order A-17?")

    assert result.status == "completed"
    assert result.text == "Order A-17 shipped on Monday."
    assert result.agent == "shipping" and swarm.active == "shipping"
    assert result.handoffs == (
        HandoffRecord(
            from_agent="triage",
            to_agent="shipping",
            message="Tell the customer where order A-17 is.",
            context={"tier": "gold"},
        ),
    )
    assert [(r.agent, r.status) for r in result.results] == [
        ("triage", "completed"),
        ("shipping", "completed"),
    ]
    assert result.tool_names == ["note_order", HANDOFF_TOOL, "lookup_order"]
    assert seen == ["A-17 token-ok=True"]  # written by triage's tool, read by shipping's
    assert result.shared_context == {"order": "A-17", "api_token": SECRET}
    assert swarm.shared_state.get("order") == "A-17"
    # the handing member stops right after the handoff's tool results: no third model call
    assert len(model_of(triage).requests) == 2 and model_of(triage).remaining == 0
    # the next member's prompt is the handoff message, with the context rendered as text
    prompt = model_of(shipping).requests[0].messages
    assert len(prompt) == 1 and prompt[0].role == "user"
    assert prompt[0].text.startswith("Tell the customer where order A-17 is.")
    assert '"tier": "gold"' in prompt[0].text and "triage" in prompt[0].text
    # each member keeps its own, valid history
    assert [m.role for m in triage.messages] == ["user", "assistant", "user", "assistant", "user"]
    assert triage.messages[-1].tool_results[0].name == HANDOFF_TOOL
    assert shipping.messages[-1].text == "Order A-17 shipped on Monday."


@pytest.mark.anyio
async def test_shared_state_never_reaches_a_model_or_an_event() -> None:
    swarm, triage, shipping = support_swarm(shared_state={"internal_note": SECRET + "-initial"})
    events: list[RunEvent] = []
    result = await swarm.invoke_async("Where is my order A-17?", on_event=events.append)
    assert result.status == "completed"
    assert swarm.shared_state.get("api_token") == SECRET  # the members did use it

    requests = model_of(triage).requests + model_of(shipping).requests
    assert len(requests) == 4
    for request in requests:
        assert SECRET not in request_json(request)
    for event in events:
        assert SECRET not in json.dumps(dataclasses.asdict(event))
    # what a handoff carries does reach the next model: only that
    assert "A-17" in request_json(model_of(shipping).requests[0])


@pytest.mark.anyio
async def test_events_carry_the_member_name() -> None:
    swarm, _, _ = support_swarm()
    events: list[RunEvent] = []
    await swarm.invoke_async("Where is my order A-17?", on_event=events.append)
    tagged = [(event.type, event.agent) for event in events if event.type != "token"]
    assert tagged == [
        ("status", "triage"),
        ("step", "triage"),
        ("tool_call", "triage"),
        ("tool_result", "triage"),
        ("step", "triage"),
        ("tool_call", "triage"),
        ("tool_result", "triage"),
        ("status", "shipping"),
        ("step", "shipping"),
        ("tool_call", "shipping"),
        ("tool_result", "shipping"),
        ("step", "shipping"),
    ]
    tokens = [event for event in events if event.type == "token"]
    assert tokens and {event.agent for event in tokens} == {"shipping"}


@pytest.mark.anyio
async def test_stream_yields_tagged_events_then_the_result() -> None:
    swarm, _, _ = support_swarm()
    items = [item async for item in swarm.stream("Where is my order A-17?")]
    result = items[-1]
    assert isinstance(result, SwarmResult) and result.status == "completed"
    events = [item for item in items[:-1] if not isinstance(item, SwarmResult)]
    assert len(events) == len(items) - 1
    assert all(event.agent in ("triage", "shipping") for event in events)
    text = "".join(e.text for e in events if e.type == "token" and e.agent == "shipping")
    assert text == result.text


def ping_pong(**options: object) -> tuple[Swarm, Agent, Agent]:
    ping = Agent(ScriptedModel([handoff("pong", "your turn")], repeat=True), name="ping")
    pong = Agent(ScriptedModel([handoff("ping", "no, yours")], repeat=True), name="pong")
    return Swarm([ping, pong], **options), ping, pong  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_ping_pong_stops_at_the_handoff_limit() -> None:
    swarm, ping, pong = ping_pong(max_handoffs=3)
    events: list[RunEvent] = []
    result = await swarm.invoke_async("start", on_event=events.append)
    assert result.status == "failed"
    assert result.error is not None and result.error.code == "max_handoffs_exceeded"
    assert "3 handoffs" in result.error.message
    assert [(h.from_agent, h.to_agent) for h in result.handoffs] == [
        ("ping", "pong"),
        ("pong", "ping"),
        ("ping", "pong"),
    ]
    assert len(result.results) == 4 and result.agent == "pong"
    last = events[-1]
    assert isinstance(last, ErrorEvent) and last.code == "max_handoffs_exceeded"
    assert last.agent == "pong"
    # every member's history stays valid: each turn ends with its tool results
    for member in (ping, pong):
        assert member.messages[-1].tool_results


@pytest.mark.anyio
async def test_the_iteration_limit_counts_member_runs() -> None:
    swarm, _, _ = ping_pong(max_handoffs=10, max_iterations=2)
    result = await swarm.invoke_async("start")
    assert result.status == "failed"
    assert result.error is not None and result.error.code == "max_iterations_exceeded"
    assert len(result.handoffs) == 1 and len(result.results) == 2


@pytest.mark.anyio
async def test_the_timeout_cancels_the_running_member() -> None:
    slow = Agent(ScriptedModel([ScriptedTurn(text="x" * 200, delay=0.05)]), name="slow")
    swarm = Swarm([slow], timeout=0.2)
    events: list[RunEvent] = []
    with anyio.fail_after(5):
        result = await swarm.invoke_async("take your time", on_event=events.append)
    assert result.status == "failed"
    assert result.error is not None and result.error.code == "swarm_timeout"
    assert [r.status for r in result.results] == ["cancelled"]
    assert isinstance(events[-1], ErrorEvent) and events[-1].code == "swarm_timeout"
    assert not swarm.busy
    assert slow.messages == []  # cancelled during its first model call: history unchanged


@pytest.mark.anyio
async def test_a_bad_handoff_is_an_error_result_and_the_swarm_continues() -> None:
    triage = Agent(
        ScriptedModel(
            [
                handoff("nobody", "help"),
                handoff("triage", "help myself"),
                handoff("shipping", ""),
                handoff("shipping", "Find order A-17."),
            ]
        ),
        name="triage",
    )
    shipping = Agent(ScriptedModel(["It shipped."]), name="shipping")
    swarm = Swarm([triage, shipping])
    result = await swarm.invoke_async("Where is A-17?")
    assert result.status == "completed" and result.text == "It shipped."
    assert [(h.from_agent, h.to_agent) for h in result.handoffs] == [("triage", "shipping")]
    requests = model_of(triage).requests
    unknown, itself, empty = (last_tool_results(r)[0] for r in requests[1:4])
    assert unknown[2] == "error" and "unknown member 'nobody'" in str(unknown[1])
    assert "shipping" in str(unknown[1])  # the members are listed
    assert itself[2] == "error" and "you are 'triage'" in str(itself[1])
    assert empty[2] == "error" and "message" in str(empty[1])


@pytest.mark.anyio
async def test_only_one_handoff_per_step() -> None:
    a = Agent(
        ScriptedModel(
            [
                ScriptedTurn(
                    tool_calls=[
                        ScriptedToolCall(HANDOFF_TOOL, {"name": "b", "message": "go"}),
                        ScriptedToolCall(HANDOFF_TOOL, {"name": "c", "message": "go"}),
                    ]
                )
            ]
        ),
        name="a",
    )
    b = Agent(ScriptedModel(["b here"]), name="b")
    c = Agent(ScriptedModel(["c here"]), name="c")
    result = await Swarm([a, b, c]).invoke_async("hi")
    assert result.status == "completed" and len(result.handoffs) == 1
    outputs = [record.status for record in result.results[0].tool_calls]
    assert sorted(outputs) == ["error", "success"]
    assert result.text in ("b here", "c here")


@pytest.mark.anyio
async def test_a_failing_tool_is_an_error_result_and_the_swarm_continues() -> None:
    triage = Agent(ScriptedModel([handoff("ops", "Check the database.")]), name="triage")
    ops = Agent(
        ScriptedModel([call("flaky"), "The database is down; try later."]),
        name="ops",
        tools=[flaky],
    )
    scratch = InvocationState(caller="test")
    result = await Swarm([triage, ops]).invoke_async("status?", invocation_state=scratch)
    assert result.status == "completed" and result.text == "The database is down; try later."
    assert last_tool_results(model_of(ops).requests[1]) == [
        ("flaky", "RuntimeError: database unreachable", "error")
    ]
    assert scratch["flaky_calls"] == 1  # the caller's invocation state reached the member


@tool
def count_visit(scratch: InvocationState) -> str:
    """Count this member's visit in the run's invocation state."""
    scratch["visits"] = int(str(scratch.get("visits", 0))) + 1
    return "counted"


@pytest.mark.anyio
async def test_one_invocation_state_is_shared_by_every_member_run_of_a_turn() -> None:
    a = Agent(
        ScriptedModel([call("count_visit"), handoff("b", "go")]), name="a", tools=[count_visit]
    )
    b = Agent(ScriptedModel([call("count_visit"), "done"]), name="b", tools=[count_visit])
    scratch = InvocationState()
    result = await Swarm([a, b]).invoke_async("hi", invocation_state=scratch)
    assert result.status == "completed"
    assert scratch.get("visits") == 2


@pytest.mark.anyio
async def test_a_failing_model_fails_the_swarm_with_its_error() -> None:
    triage = Agent(ScriptedModel([handoff("ops", "Check it.")]), name="triage")
    ops = Agent(
        ScriptedModel([ScriptedTurn(error=ModelUnavailableError("provider down"))]), name="ops"
    )
    events: list[RunEvent] = []
    result = await Swarm([triage, ops]).invoke_async("status?", on_event=events.append)
    assert result.status == "failed" and result.agent == "ops"
    assert result.error is not None and result.error.code == "model_unavailable"
    errors = [event for event in events if isinstance(event, ErrorEvent)]
    assert [(e.code, e.agent) for e in errors] == [("model_unavailable", "ops")]


@pytest.mark.anyio
async def test_the_next_turn_goes_to_the_member_that_ran_last() -> None:
    swarm, triage, shipping = support_swarm("You're welcome!")
    await swarm.invoke_async("Where is my order A-17?")
    again = await swarm.invoke_async("Thanks!")
    assert again.status == "completed" and again.text == "You're welcome!"
    assert again.handoffs == () and again.run_id != ""
    sent = model_of(shipping).requests[-1].messages
    assert sent[-1].text == "Thanks!" and len(sent) == 5  # its own history came along
    assert len(model_of(triage).requests) == 2


@pytest.mark.anyio
async def test_cancel_stops_the_run_and_starts_no_other_member() -> None:
    slow = Agent(
        ScriptedModel([ScriptedTurn(text="y" * 200, delay=0.02), handoff("next", "go")]),
        name="slow",
    )
    after = Agent(ScriptedModel(["never"]), name="next")
    swarm = Swarm([slow, after])
    assert swarm.cancel() is False
    results: list[SwarmResult] = []

    async def run() -> None:
        results.append(await swarm.invoke_async("go"))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(run)
            while not model_of(slow).requests:
                await anyio.sleep(0.01)
            assert swarm.busy
            assert swarm.cancel() is True
    assert results[0].status == "cancelled"
    assert model_of(after).requests == []
    assert not swarm.busy


@pytest.mark.anyio
async def test_the_swarm_hook_sees_one_run_id_per_swarm_run() -> None:
    swarm, _, _ = support_swarm()
    started: list[tuple[str, bool, str | None]] = []
    swarm.hooks.add_callback(
        BeforeRunEvent,
        lambda event: started.append((event.context.run_id, event.resumed, event.prompt)),
    )
    result = await swarm.invoke_async("Where is my order A-17?")
    assert started == [(result.run_id, False, "Where is my order A-17?")]
    assert all(r.run_id != result.run_id for r in result.results)


def test_the_swarm_offers_the_served_agent_surface() -> None:
    swarm, triage, shipping = support_swarm(name="support", description="Customer support")
    assert swarm.name == "support" and swarm.description == "Customer support"
    assert set(swarm.tools) == {"note_order", "lookup_order"}
    assert not swarm.busy and swarm.pending_interrupts == () and swarm.context_id is None
    assert swarm.entry == "triage" and swarm.active == "triage"
    tool_of_triage = triage.tools[HANDOFF_TOOL]
    assert "shipping: Knows where orders are" in tool_of_triage.description
    assert "triage:" not in tool_of_triage.description
    assert set(tool_of_triage.input_schema["properties"]) == {"name", "message", "context"}  # type: ignore[arg-type]
    assert shipping.shared_state is swarm.shared_state is triage.shared_state
    assert swarm.session_manager is None
    with pytest.raises(ConfigurationError, match="SwarmSession"):
        swarm.session_manager = object()  # what a server does for an Agent must not pass
    result = swarm("Where is my order A-17?")  # the synchronous form
    assert result.status == "completed" and str(result) == "Order A-17 shipped on Monday."


@pytest.mark.anyio
async def test_the_synchronous_form_refuses_to_run_inside_an_event_loop() -> None:
    swarm, _, _ = support_swarm()
    with pytest.raises(RunInProgressError):
        swarm("hi")


def make_agents(*names: str) -> list[Agent]:
    return [Agent(ScriptedModel([]), name=name) for name in names]


@pytest.mark.parametrize(
    ("members", "options", "needle"),
    [
        ((), {}, "at least one member"),
        (("a", "a"), {}, "two swarm members are named 'a'"),
        (("a", "b"), {"entry": "c"}, "entry 'c'"),
        (("a",), {"max_handoffs": -1}, "max_handoffs"),
        (("a",), {"max_iterations": 0}, "max_iterations"),
        (("a",), {"timeout": 0}, "timeout"),
        (("Bad Name",), {"session": "yes"}, "cannot be persisted"),
        (("a--b",), {"session": "yes"}, "cannot be persisted"),
    ],
)
def test_configuration_errors(
    members: Sequence[str], options: dict[str, object], needle: str
) -> None:
    if options.get("session") == "yes":
        options = {"session": SwarmSession("support", "ctx-1", InMemoryStorage())}
    with pytest.raises(ConfigurationError) as info:
        Swarm(make_agents(*members), **options)  # type: ignore[arg-type]
    assert needle in str(info.value)


def test_a_member_cannot_join_two_swarms_and_the_entry_must_be_a_member() -> None:
    first = make_agents("a", "b")
    Swarm(first)
    with pytest.raises(ConfigurationError, match="another swarm"):
        Swarm([first[0], *make_agents("c")])
    with pytest.raises(ConfigurationError, match="not a member"):
        Swarm(make_agents("x"), entry=Agent(ScriptedModel([]), name="x"))
    with pytest.raises(ConfigurationError, match="must not contain"):
        SwarmSession("sup--port", "ctx-1", InMemoryStorage())


@pytest.mark.anyio
async def test_a_prompt_must_be_text_or_a_user_message() -> None:
    swarm, _, _ = support_swarm()
    with pytest.raises(InvalidRequestError, match="prompt"):
        await swarm.invoke_async(Message.assistant("not a prompt"))
    assert not swarm.busy
    result = await swarm.invoke_async(Message.user("Where is my order A-17?"))
    assert result.status == "completed"
    assert result.results[0].messages[0].text == "Where is my order A-17?"
