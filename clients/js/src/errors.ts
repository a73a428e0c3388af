/**
 * AgentError: every failure the client reports, with the wire's error `code`.
 *
 * Errors from the server keep its `{"error": {"code", "message"}}` and the HTTP status.
 * Failures found on this side have `status` 0 and one of these codes:
 *
 * - `network_error`: the server could not be reached, even after the retries;
 * - `stream_lost`: a stream dropped before its `done` frame and could not be resumed;
 * - `invalid_response`: the server answered something that is not the SPEC wire;
 * - `no_context`: the call needs a context id and the client has none yet;
 * - `busy`: the chat already has a turn in flight.
 *
 * A run that fails on the server is not an AgentError: it ends normally, with a
 * SendResult whose `status` is `failed` and whose `error` holds the code and message.
 */
export class AgentError extends Error {
  /** The machine-readable error code, e.g. `interrupt_pending` or `context_not_found`. */
  readonly code: string;
  /** The HTTP status of the response; 0 when the error was found by the client. */
  readonly status: number;

  constructor(code: string, message: string, status: number, options?: ErrorOptions) {
    super(message, options);
    this.name = "AgentError";
    this.code = code;
    this.status = status;
  }
}
