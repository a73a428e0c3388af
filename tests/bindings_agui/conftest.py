"""The AG-UI tests share the Chat Completions tests' server of the scripted agent."""

from bindings_openai.conftest import served, tool_log

__all__ = ["served", "tool_log"]
