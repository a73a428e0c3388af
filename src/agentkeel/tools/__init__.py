"""Tools: the `@tool` decorator, the Tool type and the built-in tools."""

from agentkeel.tools.builtin import current_time, read_state, write_state
from agentkeel.tools.decorator import Tool, ToolInputError, tool

__all__ = ["Tool", "ToolInputError", "current_time", "read_state", "tool", "write_state"]
