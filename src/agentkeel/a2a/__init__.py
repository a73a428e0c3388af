"""A2A 1.0 for every served agent, on the official ``a2a-sdk`` (SPEC section 6).

`A2ABinding` gives each agent definition an agent card (and an extended one), JSON-RPC
and HTTP+JSON under ``/agents/{name}/a2a``, gRPC on ``server.a2a.grpcPort``, and push
notifications; `create_app` mounts it beside the native wire, and both run their turns
on the same runtime, so contexts, sessions, runs and interrupts are shared: an A2A task
is a run, and an A2A ``contextId`` is the native wire's. docs/a2a.md has the method
list and the mapping of the native events onto A2A's, per transport.

Code inside a run started over A2A may also read the A2A message it answers
(`current_message`), attach file or data artifacts to its task (`publish_artifact`),
and ask for a direct Message reply instead of a Task (`reply_as_message`).
"""

from agentkeel.a2a.card import agent_card
from agentkeel.a2a.server import A2ABinding, a2a_routes
from agentkeel.a2a.turn import current_message, publish_artifact, reply_as_message

__all__ = [
    "A2ABinding",
    "a2a_routes",
    "agent_card",
    "current_message",
    "publish_artifact",
    "reply_as_message",
]
