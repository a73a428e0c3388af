"""Conformance suites that every backend of an agentkeel interface runs (import the modules)."""
