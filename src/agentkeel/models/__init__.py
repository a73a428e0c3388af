"""Model providers behind one small interface.

`agentkeel.models.base` holds the interface. Providers are resolved lazily by name so that
the core never imports one it does not use.
"""

from __future__ import annotations

from agentkeel.models.base import (
    FINAL_ANSWER_TOOL,
    Finish,
    Model,
    ModelChunk,
    ModelRequest,
    ModelSettings,
    OutputSchema,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolSpec,
)

__all__ = [
    "FINAL_ANSWER_TOOL",
    "Finish",
    "Model",
    "ModelChunk",
    "ModelRequest",
    "ModelSettings",
    "OutputSchema",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallDelta",
    "ToolSpec",
]
