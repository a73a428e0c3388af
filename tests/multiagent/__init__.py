"""Tests of agentkeel.multiagent."""
