"""How the demo model puts a tool's result into words, and counts the words it is sent.

Kept apart from the demo model's planning (`agentkeel.models.demo`), which decides what
to do; this module only phrases what a tool answered.
"""

from __future__ import annotations

import json
import re

from agentkeel.messages import (
    JSONObject,
    JSONValue,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from agentkeel.models.base import ModelRequest

_ABOUT_USER = "the user's "
_NAME_QUESTION = re.compile(r"^What would you like to name your (?P<thing>.+)\?$")


def result_sentence(result: ToolResultPart, tool_input: JSONObject) -> str:
    """One sentence saying what a tool answered, in the words a person would use."""
    content = show(result.content)
    if result.status == "error":
        return _failure(result.name, content, tool_input)
    if result.name == "current_time":
        return f"It is {content}."
    if result.name == "write_state":
        key, value = show(tool_input.get("key")), show(tool_input.get("value"))
        return f"I'll remember that your {key} is {value}."
    if result.name == "read_state":
        key = show(tool_input.get("key"))
        if result.content is None:
            return f"You haven't told me your {key} yet."
        return f"You told me your {key} is {content}."
    if result.name == "remember":
        return f"I'll remember that, also in our next conversations: {tool_input.get('text')}"
    if result.name == "recall":
        return _recalled(result.content, show(tool_input.get("query")))
    if result.name == "forget":
        return f"OK: I {content}." if content.startswith("forgot") else f"OK: {content}."
    if result.name == "delete_file":
        return f"Done: {content}."
    if result.name == "ask_user":
        named = _NAME_QUESTION.match(show(tool_input.get("question")))
        if named:
            return f"Then your {named['thing']} shall be called {content}."
        return f"Thanks! You told me: {content}."
    return f"The {result.name} tool returned: {content}."


def _recalled(content: JSONValue, query: str) -> str:
    texts = [
        str(match["text"])
        for match in (content if isinstance(content, list) else [])
        if isinstance(match, dict) and "text" in match
    ]
    if not texts:
        if query.startswith("the user's "):
            return f"You haven't told me your {query.removeprefix(_ABOUT_USER)} yet."
        return "I don't remember anything about you yet."
    if len(texts) == 1 or query != "the user":
        return f"From our earlier conversations I remember: {texts[0]}"
    return "From our earlier conversations I remember: " + " ".join(texts)


def _failure(tool: str, content: str, tool_input: JSONObject) -> str:
    if tool == "delete_file":
        path = show(tool_input.get("path"))
        if content.startswith("rejected: "):
            reason = content[len("rejected: ") :]
            return f"OK, I did not delete {path}. Reason: {reason}."
        return f"I could not delete {path}: {content}."
    doing = {
        "current_time": "read the clock",
        "write_state": "remember that",
        "read_state": "look that up",
        "ask_user": "ask you",
    }.get(tool, f"use {tool}")
    return f"I could not {doing}: {content}."


def words(text: str) -> int:
    """The demo's stand-in for a token count: whitespace-separated words."""
    return len(text.split())


def input_words(request: ModelRequest) -> int:
    """The words a request sends (its usage's input tokens), tool inputs and results too."""
    total = words(request.system_prompt or "")
    for message in request.messages:
        for part in message.parts:
            if isinstance(part, TextPart | ThinkingPart):
                total += words(part.text)
            elif isinstance(part, ToolCallPart):
                total += words(json.dumps(part.input))
            else:
                total += words(show(part.content))
    return total


def show(value: JSONValue) -> str:
    """A JSON value as text: strings as they are, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value)
