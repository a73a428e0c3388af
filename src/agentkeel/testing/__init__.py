"""Test helpers that other projects can use too: conformance suites for our Protocols."""
