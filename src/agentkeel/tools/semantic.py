"""The semantic tools: remember, recall and forget, on the caller's memory.

They read the memory from the run context (`RunContext.memory`), which the server sets
to the calling principal's scope, so a model can never reach another principal's items.
Without a configured memory they fail with a tool error that says so.
"""

from __future__ import annotations

from agentkeel.context import RunContext
from agentkeel.memory.errors import MemoryNotConfiguredError
from agentkeel.memory.memory import AgentMemory
from agentkeel.messages import JSONObject, JSONValue
from agentkeel.tools.decorator import tool

__all__ = ["forget", "recall", "remember"]


def _memory(context: RunContext) -> AgentMemory:
    if context.memory is None:
        raise MemoryNotConfiguredError(
            'this agent has no memory across conversations (framework.json: add "memory")'
        )
    return context.memory


@tool
async def remember(text: str, context: RunContext, key: str | None = None) -> JSONObject:
    """Remember a fact about the user for future conversations.

    Args:
        text: The fact, as a sentence ("The user's favourite colour is blue").
        context: The run (injected, never shown to the model).
        key: A short name to update or forget it by later; a new one when omitted.
    """
    item = await _memory(context).remember(text, key=key, run_id=context.run_id)
    return {"key": item.key, "text": item.text}


@tool
async def recall(query: str, context: RunContext, limit: int = 3) -> JSONValue:
    """Search what you remember about the user from any conversation.

    Args:
        query: What to look for, in words ("favourite colour").
        context: The run (injected, never shown to the model).
        limit: How many of the best matches to return (1 to 20).
    """
    matches = await _memory(context).recall(query, limit=max(1, min(limit, 20)))
    return [{"key": m.item.key, "text": m.item.text, "score": round(m.score, 4)} for m in matches]


@tool
async def forget(key: str, context: RunContext) -> str:
    """Forget one remembered fact, by the key remember returned.

    Args:
        key: The key of the fact.
        context: The run (injected, never shown to the model).
    """
    if await _memory(context).forget(key):
        return f"forgot {key}"
    return f"nothing was remembered under {key}"
