"""``agentkeel chat`` for real: the command in a pseudo-terminal, talking to a real server."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator

import pexpect
import pytest

from . import Served, free_port, serve

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]|\r")
CLEAR_LINE = "\r\x1b[K"
CONTEXT_LINE = re.compile(r"  context: (ctx-[0-9a-f]{36}) \(continue later with --context \1\)")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serve(tmp_path_factory.mktemp("chat-server")) as served:
        yield served


def chat(*args: str, env: dict[str, str] | None = None) -> pexpect.spawn[str]:
    """``agentkeel chat ARGS`` in a pseudo-terminal (so colours and the spinner are on)."""
    environment = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    environment.update({"TERM": "xterm", "PYTHONIOENCODING": "utf-8", **(env or {})})
    child = pexpect.spawn(
        sys.executable,
        ["-m", "agentkeel.cli", "chat", *args],
        env=environment,
        encoding="utf-8",
        timeout=30,
        dimensions=(40, 200),
    )
    return child


class Transcript:
    """Everything the child printed, raw and without terminal control codes."""

    def __init__(self, child: pexpect.spawn[str]) -> None:
        self.child = child
        self.raw = ""

    def expect(self, pattern: str) -> str:
        """Wait for `pattern` (a regex); returns what was printed before it."""
        self.child.expect(pattern)
        before = f"{self.child.before}"
        self.raw += before + f"{self.child.after}"
        return before

    def send(self, line: str) -> None:
        self.child.sendline(line)

    @property
    def text(self) -> str:
        """What a person sees: a line cleared by the spinner is gone, colours dropped."""
        shown = ""
        for piece in re.split(f"({re.escape(CLEAR_LINE)})", self.raw.replace("\r\n", "\n")):
            shown = shown[: shown.rfind("\n") + 1] if piece == CLEAR_LINE else shown + piece
        return ANSI.sub("", shown)

    def finish(self) -> int:
        self.child.expect(pexpect.EOF)
        self.raw += f"{self.child.before}"
        self.child.close()
        status = self.child.exitstatus
        assert status is not None, f"the chat was killed by signal {self.child.signalstatus}"
        return status


def test_a_conversation_streams_and_shows_tools_thinking_and_the_context(server: Served) -> None:
    term = Transcript(chat(server.url, "--agent", "slow"))
    term.expect("you> ")
    assert "agentkeel chat: agent 'slow' at " + server.url in term.text
    term.send("What time is it?")
    before_answer = term.expect(r"\x1b\[2mThe user")  # thinking, dimmed, arrives first...
    assert "It is " not in before_answer  # ...while the answer is still being generated
    term.expect(r"It is \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00\.")
    term.expect("you> ")
    term.send("Remember that my favourite colour is blue")
    term.expect("you> ")
    term.send("exit")
    assert term.finish() == 0

    text = term.text
    assert "\r\x1b[K|" in term.raw  # the spinner, while waiting for the first token
    assert "  -> tool current_time\n  <- current_time: success\n" in text
    assert "The user wants to know the time, so I will call current_time.\n" in text
    assert "I'll remember that your favourite colour is blue.\n" in text
    contexts = CONTEXT_LINE.findall(text)
    assert len(contexts) == 1  # shown once, when it became known
    assert server.session_exists(contexts[0], agent="slow")
    assert text.endswith("you> exit\nbye\n")


def test_approvals_and_questions_are_asked_and_answered(server: Served) -> None:
    term = Transcript(chat(server.url))
    term.expect("you> ")
    assert "agent 'demo'" in term.text  # without --agent: the server's first agent
    term.send("Delete notes.txt")
    term.expect(r"Run delete_file\? \[y/N\] ")
    term.send("y")
    term.expect(r"Done: deleted notes\.txt \(demo: nothing was really deleted\)\.")
    term.expect("you> ")
    term.send("Delete notes.txt")
    term.expect(r"Run delete_file\? \[y/N\] ")
    term.send("n")
    term.expect("Reason: ")
    term.send("I still need it")
    term.expect(r"OK, I did not delete notes\.txt\. Reason: I still need it\.")
    term.expect("you> ")
    term.send("Ask me about my day")
    term.expect(r"What can you tell me about your day\? ")
    term.send("sunny")
    term.expect(r"Thanks! You told me: sunny\.")
    term.expect("you> ")
    term.child.sendeof()
    assert term.finish() == 0

    text = term.text
    approved, refused = text.split("you> Delete notes.txt\n")[1:3]
    asked = "  ! Run delete_file: Delete the file notes.txt\nRun delete_file? [y/N] "
    assert asked + "y\n  -> tool delete_file\n  <- delete_file: success\n" in approved
    assert asked + "n\nReason: I still need it\n" in refused
    assert "  x delete_file: rejected, not run\n" in refused
    assert "-> tool delete_file" not in refused
    assert "  <- ask_user: success\n" in text
    assert "Traceback" not in text


def test_ctrl_c_cancels_the_run_on_the_server_and_keeps_the_context(server: Served) -> None:
    # SPEC 3 (cancel): Ctrl-C in a reply now stops the run on the server, not just the wait
    term = Transcript(chat(server.url, "--agent", "slow"))
    term.expect("you> ")
    term.send("Remember that my favourite colour is green")
    term.expect("you> ")
    term.send("What time is it?")
    term.expect(r"\x1b\[2mThe user")  # the run is streaming
    term.child.sendintr()
    term.expect(r"stopping the run on the server")
    term.expect(r"run cancelled: the run was cancelled")
    term.expect("you> ")
    term.send("What is my favourite colour?")
    term.expect(r"You told me your favourite colour is green\.")
    term.expect("you> ")
    term.send("quit")
    assert term.finish() == 0
    text = term.text
    assert "It is " not in text.split("What time is it?")[1].split("you> ")[0]  # it stopped
    contexts = CONTEXT_LINE.findall(text)
    assert len(contexts) == 1
    runs = server.run_records(contexts[0], agent="slow")
    assert [record["status"] for record in runs] == ["completed", "cancelled", "completed"]


def test_commands_switch_between_conversations(server: Served) -> None:
    term = Transcript(chat(server.url))
    term.expect("you> ")
    term.send("/help")
    term.expect(r"/switch ID")
    term.expect("you> ")
    term.send("Remember that my favourite colour is green")
    term.expect("you> ")
    (first,) = CONTEXT_LINE.findall(term.text)
    term.send("/new")
    term.expect("a new conversation starts with your next message")
    term.expect("you> ")
    term.send("Remember that my favourite colour is blue")
    term.expect("you> ")
    term.send(f"/switch {first}")
    term.expect(f"context: {first}")
    term.expect("you> ")
    term.send("What is my favourite colour?")
    term.expect(r"You told me your favourite colour is green\.")
    term.expect("you> ")
    term.send("/nonsense")
    term.expect(r"unknown command /nonsense \(/help lists them\)")
    term.expect("you> ")
    term.send("/switch")
    term.expect(r"error: /switch needs a context id")
    term.expect("you> ")
    term.send("exit")
    assert term.finish() == 0
    contexts = CONTEXT_LINE.findall(term.text)
    assert len(contexts) == 2 and contexts[0] == first  # /new made a second one
    assert "Traceback" not in term.text


def test_a_context_is_continued_with_dash_dash_context(server: Served) -> None:
    first = Transcript(chat(server.url))
    first.expect("you> ")
    first.send("Remember that my favourite animal is an owl")
    first.expect("you> ")
    (context_id,) = CONTEXT_LINE.findall(first.text)
    first.send("Delete notes.txt")
    first.expect(r"Run delete_file\? \[y/N\] ")
    first.child.sendintr()  # leave the question open and quit
    assert first.finish() == 0
    assert f"the question stays open in {context_id}" in first.text

    second = Transcript(chat(server.url, "--context", context_id))
    second.expect("you> ")
    assert f"context: {context_id}\n" in second.text
    second.send("What is my favourite animal?")
    second.expect(r"the conversation waits for an answer first")
    second.expect(r"Run delete_file\? \[y/N\] ")
    second.send("n")
    second.expect("Reason: ")
    second.send("")
    second.expect(r"OK, I did not delete notes\.txt\.")
    second.expect("you> ")
    second.send("What is my favourite animal?")
    second.expect(r"You told me your favourite animal is an owl\.")
    second.expect("you> ")
    second.send("exit")
    assert second.finish() == 0
    assert CONTEXT_LINE.findall(second.text) == []  # the id did not change


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        ((), {}, "lost the connection to http://127.0.0.1:"),
        (("--agent", "nobody"), {}, "the server has no agent 'nobody'"),
        (("--api-key-env", "AGENTKEEL_TEST_NO_SUCH_KEY"), {}, "is not set"),
    ],
)
def test_errors_are_one_line(
    server: Served, args: tuple[str, ...], env: dict[str, str], message: str
) -> None:
    url = f"http://127.0.0.1:{free_port()}" if not args else server.url
    term = Transcript(chat(url, *args, env=env))
    assert term.finish() == 1
    lines = [line for line in term.text.splitlines() if line]
    assert len(lines) == 1, term.text
    assert lines[0].startswith("agentkeel: error: ") and message in lines[0]


def test_a_bad_url_is_one_line() -> None:
    term = Transcript(chat("localhost:8000"))
    assert term.finish() == 1
    assert (
        term.text.strip() == "agentkeel: error: 'localhost:8000' is not an http:// or https:// URL"
    )


def test_commands_read_fork_retry_and_edit_the_conversation(server: Served) -> None:
    term = Transcript(chat(server.url))
    term.expect("you> ")
    term.send("/history")
    term.expect(r"nothing yet: this is a new conversation")
    term.expect("you> ")
    term.send("Remember that my favourite colour is green")
    term.expect("you> ")
    (first,) = CONTEXT_LINE.findall(term.text)
    term.send("/history")
    term.expect(r"msg-[0-9a-f]{24}  you: Remember that my favourite colour is green")
    term.expect(r"msg-[0-9a-f]{24}  agent: I'll remember that your favourite colour is green\.")
    term.expect("you> ")
    term.send("/retry")  # the same answer again, from a history cut before it
    term.expect(r"I'll remember that your favourite colour is green\.")
    term.expect("you> ")
    term.send("/edit Remember that my favourite colour is red")
    term.expect(r"I'll remember that your favourite colour is red\.")
    term.expect("you> ")
    term.send("/history")
    term.expect(r"agent: I'll remember that your favourite colour is red\.")
    term.expect("you> ")
    term.send("/fork")
    term.expect(r"forked into (ctx-[0-9a-f]{36}) \(the original stays as " + first + r"\)")
    match = term.child.match
    assert isinstance(match, re.Match)
    forked = str(match.group(1))
    term.expect("you> ")
    term.send("/list")
    term.expect(r"\* " + forked + "  Remember that my favourite colour is red")
    term.expect("you> ")
    term.send("exit")
    assert term.finish() == 0
    history = term.text.split("you> /history\n")[3].split("you> ")[0]
    assert history.count("  you: ") == 1 and "green" not in history  # edited, not appended
    assert "  agent: [tools: write_state]\n" in history
    listed = term.text.split("you> /list\n")[1].split("you> ")[0]
    assert f"  {first}  " in listed and f"* {forked}  " in listed
    assert "Traceback" not in term.text
