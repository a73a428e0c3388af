"""Tools: the `@tool` decorator, the Tool type and the built-in tools."""

from agentkeel.tools.builtin import current_time, read_state, write_state
from agentkeel.tools.decorator import Tool, ToolInputError, tool
from agentkeel.tools.semantic import forget, recall, remember

__all__ = [
    "Tool",
    "ToolInputError",
    "current_time",
    "forget",
    "read_state",
    "recall",
    "remember",
    "tool",
    "write_state",
]
