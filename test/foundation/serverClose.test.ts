import { once } from 'node:events';
import { createConnection, type Socket } from 'node:net';
import { Readable } from 'node:stream';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { boundedClose } from '../../src/serverClose.js';
import { waitFor } from '../helpers/wait.js';

/** Far above any bound of boundedClose: reached only when closing waits without one. */
const DEADLINE_MS = 20_000;

/** Whether `promise` settles before the deadline: a deadline, not a timed assertion. */
async function settlesBeforeDeadline(promise: Promise<unknown>): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), DEADLINE_MS);
  });
  try {
    return await Promise.race([promise.then(() => true), late]);
  } finally {
    clearTimeout(timer);
  }
}

/** A raw client: what it writes is sent as is, and nothing it is sent is ever read. */
async function rawClient(port: number, request: string): Promise<Socket> {
  const socket = createConnection({ host: '127.0.0.1', port });
  await once(socket, 'connect');
  socket.pause();
  socket.on('error', () => {});
  socket.write(request);
  return socket;
}

describe('boundedClose', () => {
  const apps: FastifyInstance[] = [];
  const sockets: Socket[] = [];
  afterEach(async () => {
    for (const socket of sockets.splice(0)) socket.destroy();
    for (const app of apps.splice(0)) await app.close();
  });

  async function start(
    routes: (app: FastifyInstance) => void,
    cutAfterMs = 200,
  ): Promise<{ port: number; close: () => Promise<void> }> {
    const app = Fastify({ logger: false });
    apps.push(app);
    const close = boundedClose(app, cutAfterMs);
    routes(app);
    await app.listen({ host: '127.0.0.1', port: 0 });
    return { port: (app.server.address() as { port: number }).port, close };
  }

  it('ends although a client never reads a large answer, sent while closing', async () => {
    let handling = false;
    const { port, close } = await start((app) => {
      app.get('/metrics', async (_request, reply) => {
        handling = true;
        await new Promise((resolve) => setTimeout(resolve, 300));
        reply.header('content-type', 'text/plain');
        // Far more than the socket buffers hold: it leaves only as fast as the client reads.
        return Buffer.alloc(32 * 1024 * 1024, 'a');
      });
    });
    const scraper = await rawClient(port, `GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`);
    sockets.push(scraper);
    await waitFor(() => handling);

    expect(await settlesBeforeDeadline(close())).toBe(true);
  }, 30_000);

  it('ends although a client stops reading a streamed answer', async () => {
    let streaming = false;
    const { port, close } = await start((app) => {
      app.get('/export', async (_request, reply) => {
        streaming = true;
        const chunk = Buffer.alloc(64 * 1024, 'b');
        reply.header('content-type', 'text/plain');
        // Endless: the response never ends, so node never counts the connection as idle.
        return Readable.from(
          (function* () {
            for (;;) yield chunk;
          })(),
        );
      });
    });
    const client = await rawClient(port, `GET /export HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`);
    sockets.push(client);
    await waitFor(() => streaming);
    await new Promise((resolve) => setTimeout(resolve, 200));

    expect(await settlesBeforeDeadline(close())).toBe(true);
  }, 30_000);

  it('still answers a request whose body was read, past the bound for cutting connections', async () => {
    let handling = false;
    const { port, close } = await start((app) => {
      app.post('/deliveries', async () => {
        handling = true;
        // A commit taking longer than the bound for cutting connections (bounded elsewhere).
        await new Promise((resolve) => setTimeout(resolve, 1_500));
        return { committed: true };
      });
    }, 100);
    const answer = fetch(`http://127.0.0.1:${port}/deliveries`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ id: 1 }),
    });
    await waitFor(() => handling);
    const closed = close();

    const res = await answer;
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ committed: true });
    expect(await settlesBeforeDeadline(closed)).toBe(true);
  }, 30_000);

  it('gives a client that reads it a large answer sent while closing, in full', async () => {
    let handling = false;
    const size = 16 * 1024 * 1024;
    const { port, close } = await start((app) => {
      app.post('/export', async (_request, reply) => {
        handling = true;
        await new Promise((resolve) => setTimeout(resolve, 500));
        reply.header('content-type', 'application/octet-stream');
        return Buffer.alloc(size, 'c');
      });
    }, 100);
    const answer = fetch(`http://127.0.0.1:${port}/export`, { method: 'POST', body: 'ok' });
    await waitFor(() => handling);
    const closed = close();

    const res = await answer;
    expect(res.status).toBe(200);
    expect((await res.arrayBuffer()).byteLength).toBe(size);
    expect(await settlesBeforeDeadline(closed)).toBe(true);
  }, 30_000);

  it('cuts a request whose body is still arriving, without handling it', async () => {
    let handled = false;
    const { port, close } = await start((app) => {
      app.post('/deliveries', async () => {
        handled = true;
        return { committed: true };
      });
    });
    const slow = await rawClient(
      port,
      `POST /deliveries HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"id":`,
    );
    sockets.push(slow);
    // The request is received (its headers parsed) before closing begins.
    await new Promise((resolve) => setTimeout(resolve, 200));

    expect(await settlesBeforeDeadline(close())).toBe(true);
    expect(handled).toBe(false);
  }, 30_000);
});
