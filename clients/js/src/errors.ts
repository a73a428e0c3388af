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
 * - `busy`: the chat already has a turn in flight;
 * - `invalid_request`: the call itself is wrong (e.g. `regenerate` with a message).
 *
 * The conversation codes of SPEC section 3 have subclasses, so `instanceof` works:
 * `NoActiveRunError`, `ContextExistsError`, `MessageNotFoundError`.
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

/** `409 no_active_run`: `cancel` found nothing running on the context. */
export class NoActiveRunError extends AgentError {
  constructor(message: string, status = 409, options?: ErrorOptions) {
    super("no_active_run", message, status, options);
    this.name = "NoActiveRunError";
  }
}

/** `409 context_exists`: `fork` was given a new context id that is already taken. */
export class ContextExistsError extends AgentError {
  constructor(message: string, status = 409, options?: ErrorOptions) {
    super("context_exists", message, status, options);
    this.name = "ContextExistsError";
  }
}

/**
 * `404 message_not_found`: `replace`, `regenerate` or `fork` named a message id that is
 * not in the transcript (or, for `replace` and `regenerate`, not of the right role).
 */
export class MessageNotFoundError extends AgentError {
  constructor(message: string, status = 404, options?: ErrorOptions) {
    super("message_not_found", message, status, options);
    this.name = "MessageNotFoundError";
  }
}

const TYPED: { readonly [code: string]: new (message: string, status: number) => AgentError } = {
  no_active_run: NoActiveRunError,
  context_exists: ContextExistsError,
  message_not_found: MessageNotFoundError,
};

/** The AgentError for a wire error: its typed subclass when the code has one. */
export function errorFromBody(code: string, message: string, status: number): AgentError {
  const Typed = TYPED[code];
  return Typed === undefined ? new AgentError(code, message, status) : new Typed(message, status);
}
