import fc from "fast-check";
import { describe, expect, it } from "vitest";

import { type SSEFrame, SSEDecoder } from "./sse.js";

// The TypeScript peer of tests/properties/test_codecs.py: whatever frames the server
// encodes, however the bytes are cut, the decoder gives them back; any bytes at all
// never make it throw. FC_NUM_RUNS raises the number of runs (the long form).
const runs = Number(process.env.FC_NUM_RUNS ?? "200");
const utf8 = new TextEncoder();

const oneLine = fc.string({ unit: "grapheme", maxLength: 20 }).filter((s) => !/[\r\n\0]/.test(s));
const frameArb = fc.record({
  data: fc.string({ unit: "grapheme", maxLength: 60 }),
  id: fc.option(fc.oneof(fc.nat().map(String), oneLine.filter((s) => s.length > 0)), { nil: undefined }),
  event: fc.option(oneLine.filter((s) => s.length > 0), { nil: undefined }),
});

/** What the server writes (agentkeel.sse.encode_frame), plus a heartbeat comment. */
function encodeFrame(
  frame: { data: string; id: string | undefined; event: string | undefined },
  comment: boolean,
): string {
  const lines: string[] = [];
  if (comment) lines.push(": heartbeat", "");
  if (frame.event !== undefined) lines.push(`event: ${frame.event}`);
  if (frame.id !== undefined) lines.push(`id: ${frame.id}`);
  for (const line of frame.data.split(/\r\n|\r|\n/)) lines.push(`data: ${line}`);
  return lines.join("\n") + "\n\n";
}

function cut(bytes: Uint8Array, points: number[]): Uint8Array[] {
  const at = [...new Set(points.map((p) => p % (bytes.length + 1)))].sort((a, b) => a - b);
  const edges = [0, ...at, bytes.length];
  return edges.slice(1).map((end, i) => bytes.slice(edges[i], end));
}

describe("SSEDecoder properties", () => {
  it("gives back every encoded frame however the bytes are chunked", () => {
    fc.assert(
      fc.property(
        fc.array(frameArb, { maxLength: 8 }),
        fc.array(fc.nat(), { maxLength: 12 }),
        fc.boolean(),
        (frames, points, comments) => {
          const stream = frames.map((f) => encodeFrame(f, comments)).join("");
          const expected: SSEFrame[] = [];
          let lastId: string | undefined;
          for (const f of frames) {
            if (f.id !== undefined) lastId = f.id;
            const data = f.data.replace(/\r\n|\r/g, "\n");
            expected.push({ id: lastId, event: f.event ?? "message", data });
          }
          const decoder = new SSEDecoder();
          const got = cut(utf8.encode(stream), points).flatMap((chunk) => decoder.push(chunk));
          decoder.end();
          expect(got).toEqual(expected);
          expect(decoder.lastEventId).toBe(lastId);
        },
      ),
      { numRuns: runs },
    );
  });

  it("takes any bytes without throwing and never yields an id holding NUL", () => {
    fc.assert(
      fc.property(fc.array(fc.uint8Array({ maxLength: 64 }), { maxLength: 10 }), (chunks) => {
        const decoder = new SSEDecoder();
        for (const chunk of chunks) {
          for (const frame of decoder.push(chunk)) {
            expect(typeof frame.data).toBe("string");
            expect(frame.id?.includes("\0") ?? false).toBe(false);
          }
        }
        decoder.end();
      }),
      { numRuns: runs },
    );
  });
});
