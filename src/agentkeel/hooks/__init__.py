"""Hooks: typed events at each point of a run, and the registry that dispatches them."""

from agentkeel.hooks.events import (
    AfterModelCallEvent,
    AfterRunEvent,
    AfterToolCallEvent,
    BeforeModelCallEvent,
    BeforeRunEvent,
    BeforeToolCallEvent,
    HookEvent,
    MessageAddedEvent,
)
from agentkeel.hooks.registry import HookCallback, HookProvider, HookRegistry

__all__ = [
    "AfterModelCallEvent",
    "AfterRunEvent",
    "AfterToolCallEvent",
    "BeforeModelCallEvent",
    "BeforeRunEvent",
    "BeforeToolCallEvent",
    "HookCallback",
    "HookEvent",
    "HookProvider",
    "HookRegistry",
    "MessageAddedEvent",
]
