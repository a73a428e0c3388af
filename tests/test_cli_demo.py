"""`agentkeel demo` as a real process: a scripted conversation on stdin, the transcript out."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from agentkeel.cli import DEMO_EXAMPLES, main

SCRIPT = "\n".join(
    [
        "What time is it?",
        "Remember that my favourite colour is blue",
        "What is my favourite colour?",
        "Delete notes.txt",
        "y",
        "Delete notes.txt",
        "n",
        "I still need it",
        "What should I name my dog?",
        "Rex",
        "exit",
        "this line is never read",
    ]
)


def run_cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1", "PYTHONIOENCODING": "utf-8"}
    return subprocess.run(
        [sys.executable, "-m", "agentkeel.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


def test_scripted_demo_conversation() -> None:
    done = run_cli("demo", "--delay", "0", stdin=SCRIPT + "\n")

    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    out = done.stdout
    for example in DEMO_EXAMPLES:
        assert f"  {example}\n" in out
    assert "\x1b[" not in out  # not a terminal: no ANSI codes
    assert re.search(
        r"you> What time is it\?\n"
        r"\(thinking\) The user wants to know the time, so I will call current_time\.\n"
        r"  -> tool current_time\n"
        r"  <- current_time: success\n"
        r"\(thinking\) [^\n]+\n"
        r"It is \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00\.\n",
        out,
    )
    assert (
        "  -> tool write_state\n  <- write_state: success\n" in out
        and "I'll remember that your favourite colour is blue.\n" in out
    )
    assert (
        "  -> tool read_state\n  <- read_state: success\n" in out
        and "You told me your favourite colour is blue.\n" in out
    )
    approved, rejected = out.split("you> Delete notes.txt\n")[1:3]
    asked = "  ! Run delete_file: Delete the file notes.txt\nRun delete_file? [y/N] "
    assert asked + "y\n  -> tool delete_file\n  <- delete_file: success\n" in approved
    assert "Done: deleted notes.txt (demo: nothing was really deleted).\n" in approved
    assert asked + "n\nReason: I still need it\n" in rejected
    assert "-> tool delete_file" not in rejected
    assert "OK, I did not delete notes.txt. Reason: I still need it.\n" in rejected
    assert "What would you like to name your dog? Rex\n" in out
    assert "Then your dog shall be called Rex.\n" in out
    assert out.endswith("you> exit\nbye\n")
    assert "never read" not in out


def test_the_console_script_runs_the_demo_until_end_of_input() -> None:
    script = Path(sys.executable).with_name("agentkeel")
    if not script.exists():
        pytest.skip("the agentkeel console script is not installed next to this Python")
    done = subprocess.run(
        [str(script), "demo", "--delay", "0"],
        input="hello\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "NO_COLOR": "1"},
    )

    assert done.returncode == 0, done.stderr
    assert 'You said: "hello".' in done.stdout
    assert done.stdout.endswith("bye\n")


def test_an_agentkeel_error_is_one_line_on_stderr_and_exit_code_1() -> None:
    done = run_cli("demo", "--delay", "-1")

    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr == "agentkeel: error: the demo model's token_delay must not be negative\n"


def test_a_subcommand_is_required() -> None:
    done = run_cli()

    assert done.returncode == 2
    assert "demo" in done.stderr
    assert "Traceback" not in done.stderr


def test_main_in_process_with_end_of_input_during_a_question(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("Ask me about my weekend\n"))

    assert main(["demo", "--delay", "0"]) == 0

    out = capsys.readouterr().out
    assert "  -> tool ask_user\nWhat can you tell me about your weekend? \n" in out
    assert out.endswith("bye\n")
