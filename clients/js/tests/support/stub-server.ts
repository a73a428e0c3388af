/**
 * A tiny node:http server for client tests: each test scripts its answers, and the
 * server records every request (method, path, headers, body) for the assertions.
 * It listens on loopback only.
 */

import { type IncomingHttpHeaders, type ServerResponse, createServer } from "node:http";
import type { AddressInfo } from "node:net";

import { type Recorded, encode } from "./frames.js";

export interface SeenRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

export type Handler = (request: SeenRequest, response: ServerResponse, index: number) => void | Promise<void>;

export interface Stub {
  url: string;
  requests: SeenRequest[];
  close(): Promise<void>;
}

export async function startStub(handler: Handler): Promise<Stub> {
  const requests: SeenRequest[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const seen: SeenRequest = {
        method: req.method ?? "",
        path: req.url ?? "",
        headers: req.headers,
        body: Buffer.concat(chunks).toString("utf8"),
      };
      requests.push(seen);
      Promise.resolve(handler(seen, res, requests.length - 1)).catch((error: unknown) => {
        res.statusCode = 500;
        res.end(String(error));
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export interface SSEOptions {
  /** Send only this many frames, then cut the connection (no done frame). */
  dropAfter?: number;
  /** Instead of cutting the connection, end the response cleanly after `dropAfter` frames. */
  endCleanly?: boolean;
  /** Split each frame's bytes in two writes, to exercise the decoder across chunks. */
  split?: boolean;
}

/** Answer with recorded frames as `text/event-stream`, optionally dropping the connection. */
export async function writeSSE(response: ServerResponse, frames: readonly Recorded[], options: SSEOptions = {}) {
  response.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" });
  response.write(": connected\n\n");
  const sent = options.dropAfter === undefined ? frames : frames.slice(0, options.dropAfter);
  for (const frame of sent) {
    const bytes = Buffer.from(encode([frame]), "utf8");
    if (options.split) {
      const half = Math.floor(bytes.length / 2);
      response.write(bytes.subarray(0, half));
      await new Promise((resolve) => setTimeout(resolve, 1));
      response.write(bytes.subarray(half));
    } else {
      response.write(bytes);
    }
  }
  if (options.dropAfter !== undefined && !options.endCleanly) {
    // let the frames reach the client, then cut the connection mid-stream
    await new Promise((resolve) => setTimeout(resolve, 20));
    response.socket?.destroy();
    return;
  }
  response.end();
}

/** Answer with a JSON body. */
export function writeJSON(response: ServerResponse, status: number, body: unknown) {
  response.writeHead(status, { "Content-Type": "application/json" });
  response.end(JSON.stringify(body));
}

const CONVERSATION_PATH = /^\/agents\/[^/]+\/contexts(\/[^/]+(\/(messages|cancel|fork))?)?(\?.*)?$/;

/**
 * Answer SPEC section 3's conversation endpoints (list, summary, transcript, cancel,
 * fork) with `404 not_found`, as a server without them (or with `server.transcript:
 * false`, for the transcript) does; every other request goes to `handler`.
 */
export function withoutConversations(handler: Handler): Handler {
  return (request, response, index) => {
    const conversational = CONVERSATION_PATH.test(request.path) && !(request.method === "DELETE");
    if (conversational) return writeJSON(response, 404, { error: { code: "not_found", message: "not found" } });
    return handler(request, response, index);
  };
}
