import type { Socket } from 'node:net';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { valueWithin } from './boundedWait.js';

/**
 * How long closing a server waits for its clients to go before it cuts their connections. Without
 * a bound, one idle connection (kept alive, or opened and silent), a TLS handshake never begun or
 * a body still arriving holds shutdown until its own timeout, past the daemon's deadline.
 */
const CUT_CONNECTIONS_AFTER_MS = 1_000;

/**
 * Once a handler has sent its answer, how long the answer may take to reach its client before the
 * connection is cut. An answer that fits in the socket buffers (a webhook's 200) leaves at once;
 * a larger one (a /metrics body, tens of MB to a scraper) leaves only as fast as its client reads,
 * and a client that stalls would hold shutdown for as long as it stalls. What is cut then is the
 * tail of an answer whose outcome is already decided, never a handler's work.
 */
const DELIVER_ANSWERS_WITHIN_MS = 1_000;

/** A request being answered: `sent` once its handler sent its answer, `delivered` once it left. */
interface Answer {
  readonly sent: Promise<void>;
  readonly delivered: Promise<void>;
  markSent(): void;
}

/**
 * The way to close `app` within a bound: it stops accepting (a request arriving on a kept-alive
 * connection is answered 503) and closes idle connections; whatever is still open after
 * `cutAfterMs` is cut, once each request already being handled (its body read) has its answer
 * sent, and that answer had `deliverWithinMs` to reach its client: for the webhook receiver a 200
 * says the delivery committed, and a delivery not yet read in full is one the platform sends
 * again. A handler's own work is not cut short: it must be bounded where it is done (the
 * receiver's commit is). Call before `listen`.
 */
export function boundedClose(
  app: FastifyInstance,
  cutAfterMs = CUT_CONNECTIONS_AFTER_MS,
  deliverWithinMs = DELIVER_ANSWERS_WITHIN_MS,
): () => Promise<void> {
  // Every TCP connection, from its first byte: node's own list of an HTTPS server's connections
  // begins only after the TLS handshake.
  const sockets = new Set<Socket>();
  app.server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  const answers = new Map<FastifyRequest, Answer>();
  // The first hook after the body is read: from here on the request is owed its answer.
  app.addHook('preValidation', (request, reply, done) => {
    // A client already gone is owed nothing, and its response's 'close' came and went.
    if (request.raw.socket?.destroyed !== true) {
      let markSent = () => {};
      const sent = new Promise<void>((resolve) => {
        markSent = resolve;
      });
      // A response 'close's once it has left for the kernel, or when its connection ends.
      const delivered = new Promise<void>((resolve) => reply.raw.once('close', resolve));
      void delivered.then(() => {
        markSent();
        answers.delete(request);
      });
      answers.set(request, { sent, delivered, markSent });
    }
    done();
  });
  // The answer is decided and handed to be written: what is left depends on the client alone.
  app.addHook('onSend', (request, _reply, payload, done) => {
    answers.get(request)?.markSent();
    done(null, payload);
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
      // Only requests received before closing began can: later ones are answered 503 unread.
      const waited = new Set<Answer>();
      for (;;) {
        const pending = [...answers.values()].filter((answer) => !waited.has(answer));
        if (pending.length === 0) break;
        for (const answer of pending) waited.add(answer);
        await Promise.all(pending.map((answer) => answer.sent));
        await valueWithin(Promise.all(pending.map((answer) => answer.delivered)), deliverWithinMs, undefined);
      }
      for (const socket of sockets) socket.destroy();
      await closed;
    })();
    return closing;
  };
}
