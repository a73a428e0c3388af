"""DemoModel: the offline, deterministic ``demo`` model that needs no key.

It exists so that `agentkeel demo`, `make run` and the examples show every feature of a
run (thinking, streamed tokens, tool calls, approvals and questions to the person)
without a network or a credential. It does not understand language: it matches a few
keywords in the last user message and picks a tool, then turns the tool's result into a
sentence. Everything it streams depends only on the request, so tests can pin its
output, and it only requests tools the request offers.

The prompts it understands (case-insensitive):

- the time: "What time is it?", "What's the date in Europe/Oslo?" -> ``current_time``;
- memory: "Remember that my favourite colour is blue", "My name is Ada" ->
  ``write_state``; "What is my favourite colour?", "Recall name", "What did I tell
  you?" -> ``read_state``;
- memory across conversations (when the agent has the semantic tools): "Remember for
  next time that my favourite colour is blue" -> ``remember``; in any later conversation
  "What is my favourite colour?" -> ``recall`` (unless this conversation stored it with
  ``write_state``); "Forget my favourite colour" -> ``forget``;
- approval: "Delete notes.txt" -> ``delete_file`` (a tool that needs approval);
- input: "Ask me about my weekend", "What should I name my dog?" -> ``ask_user``;
- anything else gets a friendly echo that says what the demo can do.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import anyio

from agentkeel.errors import ConfigurationError
from agentkeel.messages import (
    JSONObject,
    Message,
    ToolResultPart,
)
from agentkeel.models.base import (
    Finish,
    ModelChunk,
    ModelRequest,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
)
from agentkeel.models.demo_phrasing import input_words, result_sentence, words
from agentkeel.result import Usage

__all__ = ["DemoModel"]

_FLAGS = re.IGNORECASE
_DELETE = re.compile(r"\bdelete\s+(?:the\s+)?(?:file\s+)?(?P<path>[^\s,;!?\"']+)", _FLAGS)
_NAME = re.compile(
    r"\bwhat\s+should\s+i\s+(?:name|call)\s+(?:my\s+|the\s+|a\s+|an\s+|our\s+)?"
    r"(?P<thing>[^?.!]+)",
    _FLAGS,
)
_ASK = re.compile(r"\bask\s+me\b(?:\s+about\s+(?P<topic>[^?.!]+))?", _FLAGS)
_REMEMBER = re.compile(
    r"\bremember\s+(?:that\s+)?(?P<key>.+?)\s+(?:is|are)\s+(?P<value>.+)", _FLAGS
)
_NEXT_TIME = re.compile(
    r"\b(?:for\s+next\s+time|next\s+time|for\s+later|in\s+future|for\s+good|"
    r"across\s+conversations|don't\s+forget)\b",
    _FLAGS,
)
_FACT = re.compile(
    r"\b(?:that\s+)?(?:my\s+)?(?P<key>[a-z][\w ]*?)\s+(?:is|are)\s+(?P<value>[^.!?]+)", _FLAGS
)
_FORGET = re.compile(r"\bforget\s+(?:about\s+)?(?:that\s+)?(?P<key>[^?.!]+)", _FLAGS)
_ABOUT_ME = re.compile(r"\bwhat\s+do\s+you\s+(?:remember|know)\s+about\s+me\b", _FLAGS)
_TOLD = re.compile(r"\bwhat\s+did\s+i\s+tell\s+you(?:\s+about\s+(?P<key>[^?.!]+))?", _FLAGS)
_RECALL = re.compile(r"\b(?:what(?:'s|\s+is|\s+are|\s+was)\s+my|recall)\s+(?P<key>[^?.!]+)", _FLAGS)
_MY_IS = re.compile(r"\bmy\s+(?P<key>.+?)\s+(?:is|are)\s+(?P<value>.+)", _FLAGS)
_ROUTE = re.compile(r"(?P<keyword>[a-z][a-z ]*?)\s*->\s*(?P<member>[a-z0-9_-]+)", _FLAGS)
"""A routing rule in a swarm member's system prompt: ``time -> clock``."""
_TIME = re.compile(r"\b(?:time|clock|date)\b", _FLAGS)
_ZONE = re.compile(
    r"(?<![\w/])(?P<zone>(?:africa|america|antarctica|asia|atlantic|australia|europe|indian"
    r"|pacific|etc)(?:/[a-z0-9_+-]+)+|utc)\b",
    _FLAGS,
)
_SWAP = {"my": "your", "me": "you", "i": "you", "mine": "yours", "myself": "yourself"}

_CAPABILITIES = (
    "I'm the offline demo model, so I only know a few tricks: ask me the time, tell me "
    'to remember something ("Remember that my favourite colour is blue"), ask what '
    "you told me, ask me to delete a file (you'll have to approve it), or say "
    '"ask me a question".'
)


@dataclass(frozen=True, slots=True)
class _Plan:
    """What the demo model answers: thinking, then text or one tool call."""

    thinking: str
    text: str = ""
    tool: str | None = None
    tool_input: JSONObject | None = None


class DemoModel:
    """An offline model that picks a tool by keywords and answers from its results.

    Args:
        token_delay: Seconds to wait before each streamed chunk, so that a terminal or a
            browser shows tokens arriving; 0 streams at once (tests).

    Raises:
        ConfigurationError: If `token_delay` is negative.
    """

    def __init__(self, *, token_delay: float = 0.01) -> None:
        if token_delay < 0:
            raise ConfigurationError("the demo model's token_delay must not be negative")
        self._token_delay = token_delay

    @property
    def name(self) -> str:
        """Always ``demo``."""
        return "demo"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        """Stream thinking, then either a tool call or the answer text, then Finish."""
        plan = _plan(request)
        chunks: list[ModelChunk] = [ThinkingDelta(text=p) for p in _pieces(plan.thinking)]
        chunks.extend(TextDelta(text=p) for p in _pieces(plan.text))
        arguments = ""
        if plan.tool is not None:
            arguments = json.dumps(plan.tool_input or {})
            half = len(arguments) // 2
            call_id = f"call-demo-{len(request.messages)}"
            chunks.append(
                ToolCallDelta(index=0, id=call_id, name=plan.tool, arguments=arguments[:half])
            )
            chunks.append(ToolCallDelta(index=0, arguments=arguments[half:]))
        for chunk in chunks:
            if self._token_delay:
                await anyio.sleep(self._token_delay)
            yield chunk
        usage = Usage(
            input_tokens=input_words(request),
            output_tokens=words(plan.thinking) + words(plan.text) + words(arguments),
        )
        yield Finish(stop_reason="end_turn" if plan.tool is None else "tool_use", usage=usage)


# -- deciding ---------------------------------------------------------------------------


def _plan(request: ModelRequest) -> _Plan:
    last = request.messages[-1] if request.messages else None
    if last is None or last.role != "user":
        return _Plan(thinking="There is nothing to answer yet.", text="Hello! " + _CAPABILITIES)
    if last.tool_results:
        return _answer_results(last.tool_results, request.messages)
    return _plan_for_text(last.text, request)


def _plan_for_text(text: str, request: ModelRequest) -> _Plan:
    """The rules, most specific first (so "remember that my date is ..." is memory)."""
    available = {spec.name for spec in request.tools}
    if (routed := _route(text, request.system_prompt, available)) is not None:
        return routed
    if match := _DELETE.search(text):
        path = match["path"].rstrip(".") or match["path"]
        return _use(
            available,
            "delete_file",
            {"path": path},
            f"The user wants {path} deleted. delete_file needs their approval first.",
        )
    if match := _NAME.search(text):
        thing = _swap_pronouns(match["thing"].strip())
        return _ask(available, f"What would you like to name your {thing}?")
    if match := _ASK.search(text):
        topic = match["topic"]
        question = (
            f"What can you tell me about {_swap_pronouns(topic.strip())}?"
            if topic
            else "What would you like me to know?"
        )
        return _ask(available, question)
    if (memory := _semantic(text, request, available)) is not None:
        return memory
    if (match := _REMEMBER.search(text)) and _value(match["value"]):
        return _remember(available, _key(match["key"]), _value(match["value"]))
    if match := _TOLD.search(text):
        key = _key(match["key"]) if match["key"] else _last_remembered(request.messages)
        if key is None:
            return _Plan(
                thinking="The user asks what they told me, but they never asked me to "
                "remember anything.",
                text="You haven't asked me to remember anything yet. Try: Remember that "
                "my favourite colour is blue.",
            )
        return _recall(available, key)
    if match := _RECALL.search(text):
        return _recall(available, _key(match["key"]))
    if (match := _MY_IS.search(text)) and _value(match["value"]):
        return _remember(available, _key(match["key"]), _value(match["value"]))
    if _TIME.search(text):
        zone = _zone(text)
        where = f" in {zone}" if zone else ""
        return _use(
            available,
            "current_time",
            {"timezone": zone} if zone else {},
            f"The user wants to know the time{where}, so I will call current_time.",
        )
    return _Plan(
        thinking="No tool is needed for this; I will echo it and say what I can do.",
        text=f'You said: "{text.strip()}". {_CAPABILITIES}',
    )


def _semantic(text: str, request: ModelRequest, available: set[str]) -> _Plan | None:
    """Memory across conversations, when the agent has the semantic tools."""
    if "remember" in available and _NEXT_TIME.search(text):
        cleaned = _NEXT_TIME.sub(" ", re.sub(r"\bremember\b", " ", text, flags=_FLAGS))
        if (match := _FACT.search(cleaned)) and _value(match["value"]):
            key, value = _key(match["key"]), _value(match["value"])
            return _Plan(
                thinking=f"The user wants me to remember their {key} in later conversations "
                "too, so I will store it with remember.",
                tool="remember",
                tool_input={"text": f"The user's {key} is {value}.", "key": key},
            )
    if "forget" in available and (match := _FORGET.search(text)):
        key = _key(match["key"])
        return _Plan(
            thinking=f"The user wants me to forget their {key}, so I will call forget.",
            tool="forget",
            tool_input={"key": key},
        )
    if "recall" not in available:
        return None
    if _ABOUT_ME.search(text):
        return _Plan(
            thinking="The user asks what I remember about them, so I will search my memory.",
            tool="recall",
            tool_input={"query": "the user", "limit": 5},
        )
    match = _RECALL.search(text)
    if match is None:
        return None
    key = _key(match["key"])
    if "read_state" in available and key in _written_keys(request.messages):
        return None  # told in this conversation: read_state has it
    return _Plan(
        thinking=f"The user asks about their {key}; I will look in what I remember from "
        "our conversations with recall.",
        tool="recall",
        tool_input={"query": f"the user's {key}"},
    )


def _route(text: str, system_prompt: str | None, available: set[str]) -> _Plan | None:
    """In a swarm, hand the request to the member its system prompt routes it to.

    The routes are ``keyword -> member`` pairs in the system prompt (e.g. a triage desk's
    ``Routes: time -> clock, remember -> memory``); the first keyword found in the text
    wins. Without the handoff tool or a matching route, the member answers itself.
    """
    if "handoff_to_agent" not in available or not system_prompt:
        return None
    lowered = text.lower()
    for match in _ROUTE.finditer(system_prompt):
        keyword = match["keyword"].strip().lower().split()[-1]
        if keyword and re.search(rf"\b{re.escape(keyword)}", lowered):
            member = match["member"]
            return _Plan(
                thinking=f"This is about {keyword}; {member} handles that, so I hand it over.",
                tool="handoff_to_agent",
                tool_input={"name": member, "message": text.strip()},
            )
    return None


def _use(available: set[str], tool: str, tool_input: JSONObject, thinking: str) -> _Plan:
    """Call `tool`, or explain in text when the request does not offer it."""
    if tool in available:
        return _Plan(thinking=thinking, tool=tool, tool_input=tool_input)
    return _Plan(
        thinking=f"{thinking} But the {tool} tool is not available here, so I will say so.",
        text=f"I would use the {tool} tool for that, but this agent does not have it.",
    )


def _ask(available: set[str], question: str) -> _Plan:
    return _use(
        available,
        "ask_user",
        {"question": question},
        "I need an answer from the user, so I will ask them with ask_user.",
    )


def _remember(available: set[str], key: str, value: str) -> _Plan:
    return _use(
        available,
        "write_state",
        {"key": key, "value": value},
        f"The user wants me to remember their {key}, so I will store it with write_state.",
    )


def _recall(available: set[str], key: str) -> _Plan:
    return _use(
        available,
        "read_state",
        {"key": key},
        f"The user asks about their {key}, so I will look it up with read_state.",
    )


# -- answering from tool results --------------------------------------------------------


def _answer_results(results: Sequence[ToolResultPart], messages: Sequence[Message]) -> _Plan:
    calls = {call.id: call for message in messages for call in message.tool_calls}
    names = ", ".join(result.name for result in results)
    sentences = []
    for result in results:
        call = calls.get(result.call_id)
        sentences.append(result_sentence(result, {} if call is None else call.input))
    return _Plan(
        thinking=f"The {names} tool answered, so I will put its result into words.",
        text=" ".join(sentences),
    )


# -- helpers ----------------------------------------------------------------------------


def _pieces(text: str) -> list[str]:
    """Split into word-sized deltas that join back to `text` (leading spaces kept)."""
    return re.findall(r"\s*\S+\s*$|\s*\S+", text)


def _key(raw: str) -> str:
    """Normalize a memory key: lower case, single spaces, no leading "my"/"the"."""
    words = re.sub(r"[?.!,;:\"']", " ", raw).lower().split()
    while len(words) > 1 and words[0] in ("my", "the", "your", "our"):
        words = words[1:]
    return " ".join(words)


def _value(raw: str) -> str:
    return raw.strip().rstrip(".!?").strip()


def _swap_pronouns(text: str) -> str:
    return " ".join(_SWAP.get(word.lower(), word) for word in text.split())


def _zone(text: str) -> str | None:
    match = _ZONE.search(text)
    if match is None:
        return None
    zone = match["zone"]
    if zone.lower() == "utc":
        return "UTC"
    if zone != zone.lower():
        return zone
    return "/".join(
        "_".join(word.capitalize() for word in segment.split("_")) for segment in zone.split("/")
    )


def _written_keys(messages: Sequence[Message]) -> set[str]:
    return {
        key
        for message in messages
        for call in message.tool_calls
        if call.name == "write_state" and isinstance(key := call.input.get("key"), str)
    }


def _last_remembered(messages: Sequence[Message]) -> str | None:
    for message in reversed(messages):
        for call in reversed(message.tool_calls):
            key = call.input.get("key")
            if call.name == "write_state" and isinstance(key, str):
                return key
    return None
