"""The fuzz run's seed in the header and the number of cases tried in the summary."""

from __future__ import annotations

import pytest

from fuzz import budget


def pytest_report_header() -> str:
    return f"wire fuzzing: seed {budget.SEED} (AGENTKEEL_FUZZ_SEED={budget.SEED} replays it)"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if budget.TRIED:
        terminalreporter.write_line(
            f"wire fuzzing: {sum(budget.TRIED.values())} cases over {len(budget.TRIED)} "
            f"operations, seed {budget.SEED}"
        )
