"""Tests of the AI SDK binding (SPEC 10): parts, request parsing, and the wire over HTTP."""
