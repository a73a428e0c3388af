"""The ``agentkeel`` command: wiring only, one function per subcommand.

Each subcommand has an ``_add_<name>`` function that declares its arguments on the
shared parser and sets ``handler`` to the function that runs it (``args -> exit code``),
so adding ``serve`` or ``chat`` means adding one pair of functions and one line in
`build_parser`. An AgentkeelError ends the command with a one-line message on stderr
and exit code 1, never a stack trace.

Subcommands:

- ``demo``: talk to the offline demo agent in the terminal (no API key needed).
- ``chat``: talk to an agent on a running server (``agentkeel chat URL``).
- ``migrate``: bring a framework's database schema up to date, then exit.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import AsyncIterator, Callable

import anyio
import anyio.from_thread
import anyio.lowlevel

from agentkeel.agent import Agent, StreamItem
from agentkeel.errors import AgentkeelError
from agentkeel.interrupts import Approve, CancelRun, Decision, InputAnswer, Interrupt, Reject
from agentkeel.result import AgentResult
from agentkeel.terminal import Terminal

__all__ = ["build_parser", "main"]

Handler = Callable[[argparse.Namespace], int]

DEMO_EXAMPLES = (
    "What time is it?",
    "What time is it in Europe/Oslo?",
    "Remember that my favourite colour is blue",
    "What is my favourite colour?",
    "Delete notes.txt",
    "What should I name my dog?",
)
"""The prompts the demo banner suggests (the demo model understands each of them)."""

_EXIT_WORDS = frozenset({"exit", "quit"})
_DIM, _RESET = "\033[2m", "\033[0m"


def build_parser() -> argparse.ArgumentParser:
    """The parser of every subcommand; each subcommand registers itself here."""
    parser = argparse.ArgumentParser(
        prog="agentkeel",
        description="Serve AI agents to web and API clients.",
    )
    subcommands = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_serve(subcommands)
    _add_demo(subcommands)
    _add_chat(subcommands)
    _add_migrate(subcommands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the ``agentkeel`` command line and return its exit code.

    Args:
        argv: The arguments after the program name; None reads `sys.argv`.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    handler: Handler = args.handler
    try:
        return handler(args)
    except AgentkeelError as exc:
        print(f"agentkeel: error: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130


# -- demo -------------------------------------------------------------------------------


def _add_demo(subcommands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = subcommands.add_parser(
        "demo",
        help="talk to the offline demo agent (no API key needed)",
        description="An interactive terminal chat with the offline, deterministic demo "
        "agent: streaming, thinking, tool calls, approvals and questions.",
    )
    demo.add_argument(
        "--delay",
        type=float,
        default=0.01,
        metavar="SECONDS",
        help="pause between streamed tokens (default: %(default)s; 0 for none)",
    )
    demo.set_defaults(handler=_run_demo)


def _run_demo(args: argparse.Namespace) -> int:
    from agentkeel.tools.demo import demo_agent  # only this subcommand needs the demo

    agent = demo_agent(token_delay=args.delay)
    terminal = _Terminal(sys.stdin, sys.stdout)
    terminal.banner()
    anyio.run(_demo_session, agent, terminal)
    return 0


async def _demo_session(agent: Agent, terminal: _Terminal) -> None:
    while True:
        line = await terminal.ask("you> ")
        if line is None or line.strip().lower() in _EXIT_WORDS:
            terminal.write("bye\n")
            return
        if not line.strip():
            continue
        result = await terminal.show(agent.stream(line))
        while result.status == "suspended" and result.interrupt is not None:
            pending = result.interrupt
            decision = await _decide(terminal, pending)
            if isinstance(decision, Reject):
                terminal.write(f"  x {pending.tool}: rejected, not run\n")
            result = await terminal.show(agent.resume_stream(pending.id, decision))
            if isinstance(decision, CancelRun):
                terminal.write("bye\n")
                return


async def _decide(terminal: _Terminal, pending: Interrupt) -> Decision:
    """Ask the person for the decision `pending` needs; end of input cancels the run."""
    if pending.kind == "input":
        answer = await terminal.ask(f"{pending.prompt or 'Your answer:'} ")
        return CancelRun() if answer is None else InputAnswer(answer.strip())
    # the prompt, never the raw input: it hides the inputs the tool marks secret
    answer = await terminal.ask_approval(pending.tool, pending.prompt)
    if answer is None:
        return CancelRun()
    if answer.strip().lower() in ("y", "yes"):
        return Approve()
    reason = await terminal.ask("Reason: ")
    return Reject((reason or "").strip() or "rejected by the user")


class _Terminal(Terminal):
    """The demo's terminal: a banner, and the agent's own result type."""

    def banner(self) -> None:
        examples = "".join(f"  {example}\n" for example in DEMO_EXAMPLES)
        self.write(
            "agentkeel demo: one agent with the offline, deterministic demo model "
            "(no API key).\n"
            f"Try:\n{examples}"
            'Type "exit" or press Ctrl-D to quit.\n\n'
        )

    async def show(self, stream: AsyncIterator[StreamItem]) -> AgentResult:
        """Render a run's events as they arrive; return its result."""
        result: AgentResult | None = None
        async for item in stream:
            if isinstance(item, AgentResult):
                result = item
            else:
                self.render(item)
        self.end_line()
        if result is None:
            raise RuntimeError("internal error: the run ended without a result")
        if result.status in ("failed", "cancelled") and result.error is not None:
            self.write(f"  run {result.status}: {result.error.message}\n")
        return result


# -- chat -------------------------------------------------------------------------------


def _add_serve(subcommands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from agentkeel.server.serve import add_serve_arguments

    serve = subcommands.add_parser(
        "serve",
        help="serve the agents of a framework.json over HTTP",
        description="Serve every agent definition of framework.json on the native wire "
        "(SSE) with sessions, checkpoints and one agent per context.",
    )
    add_serve_arguments(serve)
    serve.set_defaults(handler=_run_serve)


def _run_serve(args: argparse.Namespace) -> int:
    from agentkeel.server.serve import run_serve

    return run_serve(args)


def _add_migrate(subcommands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    migrate = subcommands.add_parser(
        "migrate",
        help="migrate the storage of a framework.json, then exit",
        description="Apply the schema migrations the storage of framework.json lacks "
        "(PostgreSQL), alone, without serving; the server also runs them at start.",
    )
    migrate.add_argument("framework", help="the framework.json whose storage to migrate")
    migrate.set_defaults(handler=_run_migrate)


def _run_migrate(args: argparse.Namespace) -> int:
    from agentkeel.storage.migrate import migrate_framework

    print(f"agentkeel: {anyio.run(migrate_framework, args.framework)}")
    return 0


def _add_chat(subcommands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    chat = subcommands.add_parser(
        "chat",
        help="talk to an agent on a running agentkeel server",
        description="An interactive terminal chat with a served agent: streamed tokens, "
        "thinking, tool calls and approvals. The server keeps the conversation; the "
        "chat shows its context id, which --context continues later.",
    )
    chat.add_argument("url", metavar="URL", help="the server, e.g. http://127.0.0.1:8000")
    chat.add_argument("--agent", metavar="NAME", help="the agent (default: the server's first)")
    chat.add_argument("--context", metavar="ID", help="continue this conversation")
    chat.add_argument(
        "--api-key-env", metavar="NAME", help="the environment variable holding the API key"
    )
    chat.set_defaults(handler=_run_chat)


def _run_chat(args: argparse.Namespace) -> int:
    from agentkeel.chat import run_chat  # only this subcommand needs the client

    return run_chat(
        args.url, agent=args.agent, context_id=args.context, api_key_env=args.api_key_env
    )


if __name__ == "__main__":
    raise SystemExit(main())
