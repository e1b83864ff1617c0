import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Answer {
  status: number;
  headers: Headers;
  text: string;
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary response shapes
  json: any;
}

/** A partner API client over real HTTP, bound to one key. */
export function partner(sandbox: { url: string }, apiKey: string | undefined) {
  return async (
    method: string,
    path: string,
    body?: unknown,
    init: { rawBody?: string } = {},
  ): Promise<Answer> => {
    const headers: Record<string, string> = {};
    if (apiKey !== undefined) headers['x-api-key'] = apiKey;
    const payload = init.rawBody ?? (body === undefined ? undefined : JSON.stringify(body));
    if (payload !== undefined) headers['content-type'] = 'application/json';
    const response = await fetch(`${sandbox.url}/api/v1/partner${path}`, {
      method,
      headers,
      body: payload ?? null,
    });
    const text = await response.text();
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { status: response.status, headers: response.headers, text, json };
  };
}

export interface Received {
  headers: IncomingHttpHeaders;
  rawBody: string;
  at: number;
}

/** A local webhook receiver: records every request, answers with whatever `respond` says. */
export async function startReceiver(
  respond: (received: Received, index: number) => number | 'hang' = () => 200,
) {
  const received: Received[] = [];
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (c: Buffer) => chunks.push(c));
    request.on('end', () => {
      const entry = {
        headers: request.headers,
        rawBody: Buffer.concat(chunks).toString('utf8'),
        at: Date.now(),
      };
      received.push(entry);
      const status = respond(entry, received.length - 1);
      if (status === 'hang') return;
      response.writeHead(status, { 'content-type': 'text/plain' }).end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    received,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
