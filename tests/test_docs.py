"""The examples in the docs run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
RUNNABLE = ["concepts.md", "swarm.md"]


def python_blocks(name: str) -> list[str]:
    text = (DOCS / name).read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


@pytest.mark.parametrize("name", RUNNABLE)
def test_every_python_example_runs(name: str) -> None:
    blocks = python_blocks(name)
    assert blocks, f"{name} has no python examples"
    for index, block in enumerate(blocks):
        namespace: dict[str, object] = {"__name__": f"docs_{index}"}
        exec(compile(block, f"{name}[{index}]", "exec"), namespace)
