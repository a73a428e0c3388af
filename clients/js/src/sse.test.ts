import { describe, expect, it } from "vitest";

import { encode, timeRun } from "../tests/support/frames.js";
import { type SSEFrame, SSEDecoder, decodeSSE } from "./sse.js";

const utf8 = new TextEncoder();

/** The SPEC section 4 example, byte for byte (with its non-ASCII "°"). */
const SPEC_EXAMPLE = [
  "id: 1",
  'data: {"contextId":"ctx-1","runId":"run-1","event":{"type":"status","status":"running"}}',
  "",
  "id: 6",
  'data: {"contextId":"ctx-1","runId":"run-1","event":{"type":"token","text":"It is 4 °C"}}',
  "",
  "id: 7",
  'data: {"contextId":"ctx-1","runId":"run-1","done":true,"status":"completed","text":"It is 4 °C in Oslo.","toolCalls":["get_weather"]}',
  "",
  "",
].join("\n");

function decodeChunks(chunks: (Uint8Array | string)[]): SSEFrame[] {
  const decoder = new SSEDecoder();
  const frames = chunks.flatMap((chunk) => decoder.push(chunk));
  decoder.end();
  return frames;
}

describe("SSEDecoder", () => {
  it("decodes the SPEC example into id and data frames", () => {
    const frames = decodeChunks([utf8.encode(SPEC_EXAMPLE)]);
    expect(frames.map((f) => f.id)).toEqual(["1", "6", "7"]);
    expect(frames.map((f) => f.event)).toEqual(["message", "message", "message"]);
    expect(JSON.parse(frames[1]?.data ?? "")).toEqual({
      contextId: "ctx-1",
      runId: "run-1",
      event: { type: "token", text: "It is 4 °C" },
    });
  });

  it("gives the same frames however the bytes are split, even inside a UTF-8 character", () => {
    const bytes = utf8.encode(encode(timeRun));
    const whole = decodeChunks([bytes]);
    expect(whole).toHaveLength(timeRun.length);
    expect(whole.map((f) => JSON.parse(f.data))).toEqual(timeRun.map((r) => r.frame));
    // every single split point, including the middle of "—", "☕" and "🙂"
    for (let cut = 1; cut < bytes.length; cut += 1) {
      expect(decodeChunks([bytes.slice(0, cut), bytes.slice(cut)])).toEqual(whole);
    }
    // one byte at a time
    expect(decodeChunks(Array.from(bytes, (b) => Uint8Array.of(b)))).toEqual(whole);
  });

  it("returns several frames from one chunk, in order", () => {
    const decoder = new SSEDecoder();
    const frames = decoder.push("id: 1\ndata: a\n\nid: 2\ndata: b\n\nid: 3\ndata: c\n\n");
    expect(frames).toEqual([
      { id: "1", event: "message", data: "a" },
      { id: "2", event: "message", data: "b" },
      { id: "3", event: "message", data: "c" },
    ]);
  });

  it("treats CRLF, CR and LF line endings alike, also when CRLF is split across chunks", () => {
    const lf = "id: 9\ndata: one\ndata: two\n\n";
    const expected = [{ id: "9", event: "message", data: "one\ntwo" }];
    expect(decodeChunks([lf])).toEqual(expected);
    expect(decodeChunks([lf.replaceAll("\n", "\r\n")])).toEqual(expected);
    expect(decodeChunks([lf.replaceAll("\n", "\r")])).toEqual(expected);
    // "\r" ends one chunk and "\n" starts the next: one line end, not two (no early dispatch)
    expect(decodeChunks(["id: 9\r", "\ndata: one\r", "\ndata: two\r", "\n\r", "\n"])).toEqual(expected);
  });

  it("joins multi-line data with newlines and keeps a JSON payload intact", () => {
    const frames = decodeChunks(['data: {"a":\ndata:  1}\n\n']);
    expect(frames).toEqual([{ id: undefined, event: "message", data: '{"a":\n 1}' }]);
    expect(JSON.parse(frames[0]?.data ?? "")).toEqual({ a: 1 });
  });

  it("ignores comments and heartbeats, and blank lines without data", () => {
    const frames = decodeChunks([": keep-alive\n\n", ":\n\n", "\n\n", "id: 4\n: a comment\ndata: x\n\n"]);
    expect(frames).toEqual([{ id: "4", event: "message", data: "x" }]);
  });

  it("keeps the last id in force, reads event types, and strips one space after the colon", () => {
    const frames = decodeChunks(["id: 5\nevent: update\ndata:no-space\n\ndata:  two-spaces\n\n"]);
    expect(frames).toEqual([
      { id: "5", event: "update", data: "no-space" },
      { id: "5", event: "message", data: " two-spaces" },
    ]);
  });

  it("drops a leading byte order mark, an id with NUL, unknown fields and retry", () => {
    const frames = decodeChunks(["\uFEFFid: 1\ndata: a\n\nid: 2\0x\nretry: 10\nfoo: bar\ndata\n\n"]);
    expect(frames).toEqual([
      { id: "1", event: "message", data: "a" },
      { id: "1", event: "message", data: "" },
    ]);
  });

  it("never dispatches a frame without its blank line (a dropped connection)", () => {
    const decoder = new SSEDecoder();
    expect(decoder.push('id: 1\ndata: {"half":')).toEqual([]);
    expect(decoder.end()).toEqual([]);
    expect(decoder.lastEventId).toBe("1");
  });
});

describe("decodeSSE", () => {
  it("reads a ReadableStream of bytes", async () => {
    const bytes = utf8.encode(SPEC_EXAMPLE);
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(bytes.slice(0, 100));
        controller.enqueue(bytes.slice(100));
        controller.close();
      },
    });
    const ids: (string | undefined)[] = [];
    for await (const frame of decodeSSE(stream)) ids.push(frame.id);
    expect(ids).toEqual(["1", "6", "7"]);
  });

  it("cancels the stream when the consumer stops early", async () => {
    let cancelled = false;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        controller.enqueue(utf8.encode("data: tick\n\n"));
      },
      cancel() {
        cancelled = true;
      },
    });
    let seen = 0;
    for await (const frame of decodeSSE(stream)) {
      expect(frame.data).toBe("tick");
      seen += 1;
      if (seen === 3) break;
    }
    expect(cancelled).toBe(true);
  });

  it("reads an async iterable of text chunks", async () => {
    async function* chunks() {
      yield "data: a";
      yield "\n\ndata: b\n";
      yield "\n";
    }
    const data: string[] = [];
    for await (const frame of decodeSSE(chunks())) data.push(frame.data);
    expect(data).toEqual(["a", "b"]);
  });
});
