import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeRequest {
  readonly method: string;
  /** The path after `/api/v1/partner`, e.g. `/reviews`. */
  readonly path: string;
  readonly query: URLSearchParams;
  /** The request's body as text ('' for none). */
  readonly body: string;
}

export interface FakeAnswer {
  readonly status: number;
  /** Sent as is when a string (to serve broken bodies), else as JSON. */
  readonly body: unknown;
  /**
   * Only this many bytes of the body are sent, under a content-length promising all of it, and
   * then the connection drops: an answer cut off in transit after its status arrived.
   */
  readonly cutAfter?: number;
  /** More response headers (a redirect's `location`, a `retry-after`). */
  readonly headers?: Readonly<Record<string, string>>;
}

export interface FakePlatform {
  readonly url: string;
  /** Requests answered so far. */
  readonly requests: () => number;
  close(): Promise<void>;
}

/**
 * A platform that answers whatever `answer` says, over real HTTP: for the misbehaviours the
 * sandbox does not emulate (a body echoing the key, pagination that lies).
 */
export async function startFakePlatform(answer: (req: FakeRequest) => FakeAnswer): Promise<FakePlatform> {
  let requests = 0;
  const server = createServer(async (req, res) => {
    requests++;
    const url = new URL(req.url ?? '/', 'http://fake');
    const path = url.pathname.replace(/^\/api\/v1\/partner/, '');
    const chunks: Buffer[] = [];
    try {
      for await (const chunk of req) chunks.push(chunk as Buffer);
    } catch {
      return; // the client went away mid-body: nobody to answer
    }
    const { status, body, cutAfter, headers } = answer({
      method: req.method ?? 'GET',
      path,
      query: url.searchParams,
      body: Buffer.concat(chunks).toString('utf8'),
    });
    const bytes = Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
    res.writeHead(status, {
      'content-type': 'application/json',
      'content-length': String(bytes.length),
      ...headers,
    });
    if (cutAfter === undefined) return void res.end(bytes);
    res.write(bytes.subarray(0, cutAfter), () => res.socket?.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests: () => requests,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
