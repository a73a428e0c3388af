"""The runtime every binding shares: contexts, runs, their frames, and coordination.

No HTTP here (nothing imports Starlette): the native wire (`agentkeel.server`) and the
A2A binding (`agentkeel.a2a`) both sit on this package and never on each other.
"""
