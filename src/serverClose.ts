import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { valueWithin } from './boundedWait.js';

/**
 * How long closing a server waits for its clients to go before it cuts their connections. Without
 * a bound, one idle connection (kept alive, or opened and silent), a TLS handshake never begun or
 * a body still arriving holds shutdown until its own timeout, past the daemon's deadline.
 */
const CUT_CONNECTIONS_AFTER_MS = 1_000;

/**
 * The way to close `app` within a bound: it stops accepting (a request arriving on a kept-alive
 * connection is answered 503) and closes idle connections; whatever is still open after
 * `cutAfterMs` is cut, once each request already being handled (its body read) has its answer:
 * for the webhook receiver a 200 says the delivery committed, and a delivery not yet read in full
 * is one the platform sends again. Call before `listen`.
 */
export function boundedClose(
  app: FastifyInstance,
  cutAfterMs = CUT_CONNECTIONS_AFTER_MS,
): () => Promise<void> {
  // Every TCP connection, from its first byte: node's own list of an HTTPS server's connections
  // begins only after the TLS handshake.
  const sockets = new Set<Socket>();
  app.server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  const answering = new Set<Promise<void>>();
  app.addHook('preHandler', async (_request, reply) => {
    const answered = new Promise<void>((resolve) => reply.raw.once('close', resolve));
    answering.add(answered);
    void answered.then(() => answering.delete(answered));
  });
  let closing: Promise<void> | undefined;
  return () => {
    closing ??= (async () => {
      const closed = Promise.resolve(app.close());
      const closedInTime = await valueWithin(
        closed.then(() => true),
        cutAfterMs,
        false,
      );
      if (closedInTime) return;
      // A body that ends meanwhile joins those being answered: it is read, so it gets its answer.
      while (answering.size > 0) await Promise.all(answering);
      for (const socket of sockets) socket.destroy();
      await closed;
    })();
    return closing;
  };
}
