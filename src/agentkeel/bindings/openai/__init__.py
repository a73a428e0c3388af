"""OpenAI Chat Completions (SPEC 10): agents as models, for the official SDKs and Open WebUI.

See docs/bindings/openai.md for the mapping table.
"""

from agentkeel.bindings.openai.binding import CONTEXT_HEADERS, OpenAIBinding

__all__ = ["CONTEXT_HEADERS", "OpenAIBinding"]
