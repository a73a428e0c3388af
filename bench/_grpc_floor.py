"""A bare grpc.aio A2A servicer: what grpcio itself costs per streamed turn (bench/a2a.py).

It answers every ``SendStreamingMessage`` with the four messages a burst turn of the
bench agent streams (the Task with the user's message, the working status, one artifact
chunk with every token, the completed status), built once: no agent, no request
handler, no mapping, no storage. So a call's server CPU is grpcio's alone (accepting the
call, decoding the request, and handing each message to its poller thread and back),
a floor that no binding on grpc.aio goes under; a gRPC turn's CPU beyond it is the
binding's and the agent's.
"""

from __future__ import annotations

import asyncio
from typing import Any


def serve_floor(tokens: str) -> None:
    """Serve on a free loopback port; print its address (``host:port``) once listening."""
    import grpc.aio
    from a2a.types import a2a_pb2 as pb
    from a2a.types import a2a_pb2_grpc

    task_id, context_id = "task-floor", "ctx-floor"
    user = pb.Message(
        role=pb.ROLE_USER, message_id="m-floor", context_id=context_id, parts=[pb.Part(text="go")]
    )

    def status(state: pb.TaskState) -> pb.StreamResponse:
        update = pb.TaskStatusUpdateEvent(
            task_id=task_id, context_id=context_id, status=pb.TaskStatus(state=state)
        )
        update.status.timestamp.GetCurrentTime()
        return pb.StreamResponse(status_update=update)

    task = pb.Task(
        id=task_id,
        context_id=context_id,
        status=pb.TaskStatus(state=pb.TASK_STATE_SUBMITTED),
        history=[user],
    )
    artifact = pb.TaskArtifactUpdateEvent(
        task_id=task_id,
        context_id=context_id,
        artifact=pb.Artifact(artifact_id="response", parts=[pb.Part(text=tokens)]),
        last_chunk=True,
    )
    turn = (
        pb.StreamResponse(task=task),
        status(pb.TASK_STATE_WORKING),
        pb.StreamResponse(artifact_update=artifact),
        status(pb.TASK_STATE_COMPLETED),
    )

    class Floor(a2a_pb2_grpc.A2AServiceServicer):
        async def SendStreamingMessage(self, request: Any, context: Any) -> Any:
            del request, context
            for message in turn:
                yield message

    async def main() -> None:
        server = grpc.aio.server()
        a2a_pb2_grpc.add_A2AServiceServicer_to_server(Floor(), server)  # type: ignore[no-untyped-call]
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        print(f"127.0.0.1:{port}", flush=True)
        await server.wait_for_termination()

    asyncio.run(main())
