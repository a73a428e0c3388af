/**
 * An incremental Server-Sent Events decoder.
 *
 * It follows the WHATWG "event stream interpretation" rules, as a browser's EventSource
 * does: a frame may be split at any byte (even inside a UTF-8 character), one chunk may
 * hold several frames, lines end with CRLF, LF or CR, `:` lines are comments
 * (heartbeats), several `data:` lines join with newlines, a leading BOM is dropped, and
 * the last `id:` stays in force until another one changes it. A frame without its
 * closing blank line is never dispatched, so a dropped connection cannot produce half
 * a frame.
 */

/** One dispatched event of an event stream. */
export interface SSEFrame {
  /** The last event id in force when the frame was dispatched (the `Last-Event-ID`). */
  id: string | undefined;
  /** The event type from an `event:` line; `message` when there was none. */
  event: string;
  /** The frame's data: the values of its `data:` lines, joined by newlines. */
  data: string;
}

/** Decodes a byte (or text) stream chunk by chunk; `push` returns the completed frames. */
export class SSEDecoder {
  #text = new TextDecoder("utf-8");
  #buffer = "";
  #afterCR = false;
  #started = false;
  #lastId: string | undefined = undefined;
  #event = "";
  #data: string[] = [];

  /** Feed one chunk; returns the frames it completed, in order. */
  push(chunk: Uint8Array | string): SSEFrame[] {
    let text = typeof chunk === "string" ? chunk : this.#text.decode(chunk, { stream: true });
    if (!this.#started && text.length > 0) {
      this.#started = true;
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    }
    if (this.#afterCR && text.startsWith("\n")) text = text.slice(1); // the LF of a split CRLF
    this.#afterCR = false;
    this.#buffer += text;
    const frames: SSEFrame[] = [];
    let start = 0;
    for (let i = 0; i < this.#buffer.length; i += 1) {
      const char = this.#buffer[i];
      if (char !== "\n" && char !== "\r") continue;
      const line = this.#buffer.slice(start, i);
      if (char === "\r") {
        if (i + 1 === this.#buffer.length) this.#afterCR = true;
        else if (this.#buffer[i + 1] === "\n") i += 1;
      }
      start = i + 1;
      const frame = this.#line(line);
      if (frame !== undefined) frames.push(frame);
    }
    this.#buffer = this.#buffer.slice(start);
    return frames;
  }

  /** The end of the stream: a frame without its blank line is dropped, as the spec says. */
  end(): SSEFrame[] {
    this.push(this.#text.decode());
    this.#buffer = "";
    this.#data = [];
    this.#event = "";
    return [];
  }

  /** The id a reconnect sends as `Last-Event-ID`. */
  get lastEventId(): string | undefined {
    return this.#lastId;
  }

  #line(line: string): SSEFrame | undefined {
    if (line === "") return this.#dispatch();
    if (line.startsWith(":")) return undefined;
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    switch (field) {
      case "data":
        this.#data.push(value);
        break;
      case "id":
        if (!value.includes("\0")) this.#lastId = value;
        break;
      case "event":
        this.#event = value;
        break;
      default: // `retry` and unknown fields: nothing this client uses
        break;
    }
    return undefined;
  }

  #dispatch(): SSEFrame | undefined {
    const data = this.#data;
    const event = this.#event;
    this.#data = [];
    this.#event = "";
    if (data.length === 0) return undefined;
    return { id: this.#lastId, event: event || "message", data: data.join("\n") };
  }
}

/** A source of SSE bytes: a fetch body, or any async iterable of chunks. */
export type SSESource = ReadableStream<Uint8Array> | AsyncIterable<Uint8Array | string>;

/**
 * Decode a whole event stream into frames as they complete.
 *
 * Breaking out of the loop (or an error) cancels the underlying stream.
 */
export async function* decodeSSE(source: SSESource): AsyncGenerator<SSEFrame, void, undefined> {
  const decoder = new SSEDecoder();
  if (source instanceof ReadableStream) {
    const reader = source.getReader();
    let finished = false;
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) {
          finished = true;
          break;
        }
        yield* decoder.push(value);
      }
    } finally {
      if (!finished) await reader.cancel().catch(() => undefined);
      reader.releaseLock();
    }
  } else {
    for await (const chunk of source) yield* decoder.push(chunk);
  }
  decoder.end();
}
