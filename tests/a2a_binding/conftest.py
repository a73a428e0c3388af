"""Fixtures of the A2A suite: the end-to-end kit's servers of the scripted agent."""

from __future__ import annotations

from e2e.conftest import server_url, start_server, tool_log

__all__ = ["server_url", "start_server", "tool_log"]
