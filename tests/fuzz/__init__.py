"""Fuzzing the wire: schemathesis against a real server, with a seed printed for each run."""
