"""AG-UI 1.0 (SPEC 10): each agent for ``HttpAgent`` from ``@ag-ui/client`` and CopilotKit.

See docs/bindings/ag-ui.md for the mapping table.
"""

from agentkeel.bindings.agui.binding import AGUIBinding

__all__ = ["AGUIBinding"]
