"""The semantic tools and the auto-recall hook on an Agent configured in Python."""

from __future__ import annotations

import json

import pytest

from agentkeel import Agent
from agentkeel.memory import InMemoryMemoryStore, LexicalEmbedder, Memory, MemoryHook
from agentkeel.models.scripted import ScriptedModel, ScriptedToolCall, ScriptedTurn
from agentkeel.tools import forget, recall, remember

pytestmark = pytest.mark.anyio


def memory(auto_recall: int = 0) -> Memory:
    return Memory(store=InMemoryMemoryStore(), embedder=LexicalEmbedder(), auto_recall=auto_recall)


def agent(model: ScriptedModel, shared: Memory, principal: str, context_id: str) -> Agent:
    bound = shared.bind(principal, "assistant", context_id=context_id)
    return Agent(model, tools=[remember, recall, forget], hooks=[MemoryHook(bound)])


async def test_tools_remember_recall_and_forget_across_agents() -> None:
    shared = memory()
    writer = ScriptedModel(
        [
            ScriptedTurn(
                tool_calls=[ScriptedToolCall("remember", {"text": "Ada likes tea", "key": "drink"})]
            ),
            "ok",
        ]
    )
    await agent(writer, shared, "alice", "ctx-one").invoke_async("remember")
    reader = ScriptedModel(
        [
            ScriptedTurn(tool_calls=[ScriptedToolCall("recall", {"query": "tea"})]),
            "ok",
            ScriptedTurn(tool_calls=[ScriptedToolCall("forget", {"key": "drink"})]),
            "ok",
            ScriptedTurn(tool_calls=[ScriptedToolCall("recall", {"query": "tea"})]),
            "ok",
        ]
    )
    fresh = agent(reader, shared, "alice", "ctx-two")
    await fresh.invoke_async("what do I drink?")
    found = json.loads(_last_tool_result(reader))
    assert found[0]["key"] == "drink" and found[0]["score"] > 0.3
    await fresh.invoke_async("forget it")
    await fresh.invoke_async("again")
    assert json.loads(_last_tool_result(reader)) == []
    item_source = await shared.store.list(shared.scope_for("bob", "assistant"))
    assert item_source.items == (), "another principal saw the item"


async def test_recall_of_another_principal_finds_nothing() -> None:
    shared = memory()
    writer = ScriptedModel(
        [ScriptedTurn(tool_calls=[ScriptedToolCall("remember", {"text": "secret plan"})]), "ok"]
    )
    await agent(writer, shared, "alice", "ctx-a").invoke_async("x")
    reader = ScriptedModel(
        [ScriptedTurn(tool_calls=[ScriptedToolCall("recall", {"query": "secret plan"})]), "ok"]
    )
    await agent(reader, shared, "bob", "ctx-b").invoke_async("y")
    assert json.loads(_last_tool_result(reader)) == []


async def test_auto_recall_adds_matches_to_the_system_prompt() -> None:
    shared = memory(auto_recall=2)
    await shared.bind("alice", "assistant").remember("The user's favourite colour is blue", key="c")
    model = ScriptedModel(["Blue!"])
    bound = shared.bind("alice", "assistant", context_id="ctx-x")
    chat = Agent(model, system_prompt="Be brief.", hooks=[MemoryHook(bound)])
    await chat.invoke_async("Which favourite colour do I have?")
    prompt = model.requests[0].system_prompt or ""
    assert prompt.startswith("Be brief.\n\nWhat you remember about this user")
    assert "favourite colour is blue" in prompt
    off = ScriptedModel(["x"])
    await Agent(
        off, hooks=[MemoryHook(shared.bind("alice", "assistant"), auto_recall=0)]
    ).invoke_async("colour?")
    assert off.requests[0].system_prompt is None, "auto-recall must be off by default"


def _last_tool_result(model: ScriptedModel) -> str:
    for message in reversed(model.requests[-1].messages):
        for result in message.tool_results:
            return result.content if isinstance(result.content, str) else json.dumps(result.content)
    raise AssertionError("no tool result")
