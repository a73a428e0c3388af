"""The tool frames of a call, with its input and output when the tool is exposed.

A tool's input and output stay on the server (SPEC 4) unless the tool is declared
``expose``: then they cross the wire on its ``tool_call`` and ``tool_result`` frames
and in every binding, for pages that render what a tool returned. Secret inputs stay
masked even then, as they are in approval prompts.
"""

from __future__ import annotations

from dataclasses import replace

from agentkeel.events import ToolCallEvent, ToolResultEvent
from agentkeel.interrupts import shown_input
from agentkeel.messages import ToolCallPart
from agentkeel.middleware import ToolOutcome
from agentkeel.tools.decorator import Tool

__all__ = ["call_event", "declared_tools", "result_event"]


def call_event(call: ToolCallPart, tool: Tool | None, agent: str | None) -> ToolCallEvent:
    """The ``tool_call`` event of `call`: its input only when `tool` is exposed."""
    if tool is None or not tool.expose:
        return ToolCallEvent(id=call.id, name=call.name, agent=agent)
    return ToolCallEvent(
        id=call.id, name=call.name, input=shown_input(call.input, tool), agent=agent
    )


def result_event(
    call: ToolCallPart, tool: Tool | None, outcome: ToolOutcome, agent: str | None
) -> ToolResultEvent:
    """The ``tool_result`` event of `call`: its output only when `tool` is exposed."""
    if tool is None or not tool.expose:
        return ToolResultEvent(id=call.id, name=call.name, status=outcome.status, agent=agent)
    return ToolResultEvent(
        id=call.id,
        name=call.name,
        status=outcome.status,
        exposed=True,
        output=outcome.content,
        agent=agent,
    )


def declared_tools(
    tools: list[Tool], approve: list[str], expose: list[str], *, mcp: bool
) -> tuple[list[Tool], tuple[str, str] | None]:
    """framework.json's tools with its ``expose`` list applied, and the first bad name.

    The bad name comes as (key path, name), say ``("expose[0]", "nope")``. ``approve``
    may name an MCP server's tools (they are known only once it connects); ``expose``
    names tools of the ``tools`` list, whose frames are built here.
    """
    names = {item.name for item in tools}
    for key, listed in (("approve", approve), ("expose", expose)):
        for index, name in enumerate(listed):
            if name not in names and (key == "expose" or not mcp):
                return tools, (f"{key}[{index}]", name)
    shown = set(expose)
    return [replace(item, expose=True) if item.name in shown else item for item in tools], None
