import { readFileSync } from 'node:fs';
import Fastify, {
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify';
import type { Logger } from '../log.js';
import type { Metrics, WebhookRefusalReason } from '../metrics.js';
import { headerEventType, parseEvent, REVIEW_CREATED, versionTime } from './event.js';
import { type Inbox, InboxClosedError, InboxTimeoutError } from './inbox.js';
import { verifyDelivery } from './signature.js';

export interface WebhookServerOptions {
  /** Route of the receiver (WEBHOOK_PATH). */
  readonly path: string;
  readonly toleranceSeconds: number;
  readonly maxBodyBytes: number;
  /** The secrets in force, read once per delivery (they change on rotation). */
  readonly secrets: () => readonly string[];
  /**
   * Called when no secret matched: reloads the secrets if due, resolving whether they changed.
   * Awaited before the delivery is answered: the caller bounds it.
   */
  readonly reloadSecrets?: () => Promise<boolean>;
  readonly inbox: Pick<Inbox, 'submit'>;
  readonly log: Logger;
  readonly metrics?: Metrics;
  /** PEM certificate and key: the server terminates TLS itself when given them. */
  readonly tls?: { readonly cert: Buffer; readonly key: Buffer } | undefined;
  /** Unix seconds, read once per delivery as it arrives; replaceable so tests can fix the clock. */
  readonly nowSeconds?: () => number;
}

/** Reads the TLS files named by the configuration, if any. */
export function loadTls(files: {
  tlsCertFile: string | undefined;
  tlsKeyFile: string | undefined;
}): WebhookServerOptions['tls'] {
  if (files.tlsCertFile === undefined || files.tlsKeyFile === undefined) return undefined;
  return { cert: readFileSync(files.tlsCertFile), key: readFileSync(files.tlsKeyFile) };
}

const OTHER_METHODS = ['GET', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

/** Characters of an ignored event's type that reach the log: it is the sender's text. */
const LOGGED_TYPE_CHARS = 64;

/**
 * The public receiver: `POST <path>` with a signed review.created delivery. The body is read as raw
 * bytes whatever its content type (the signature covers the bytes, the type proves nothing; never
 * parsed before the signature is checked), and a 200 is sent only after the delivery committed.
 * Refusals store nothing: 405 method, 413 size, 401 signature or timestamp, 400 body; 503 when the commit failed or we are shutting down (the
 * platform retries). An authentic event of another type is answered 200 and stored nowhere: a
 * refusal would only make the platform retry it and record a last_error on the webhook.
 */
export function makeWebhookServer(options: WebhookServerOptions): FastifyInstance {
  const { log, metrics } = options;
  const nowSeconds = options.nowSeconds ?? (() => Date.now() / 1000);
  const app = Fastify({
    logger: false,
    bodyLimit: options.maxBodyBytes,
    // A slow or stalled client must not hold a connection for ever.
    requestTimeout: 30_000,
    return503OnClosing: true,
    ...(options.tls ? { https: { cert: options.tls.cert, key: options.tls.key } } : {}),
  }) as unknown as FastifyInstance;

  const refuse = (
    reply: FastifyReply,
    status: number,
    reason: WebhookRefusalReason,
    fields: Record<string, unknown> = {},
  ) => {
    metrics?.webhookRefusals.inc({ reason });
    log.warn({ status, reason, ip: reply.request.ip, ...fields }, 'webhook delivery refused');
    return reply.code(status).send({ error: reason });
  };

  // Any content type, or none, is kept as the raw bytes the signature covers.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => {
    done(null, body);
  });

  app.setErrorHandler((error: FastifyError, request, reply) => {
    if (request.url.split('?')[0] !== options.path) return reply.code(error.statusCode ?? 500).send();
    if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
      return refuse(reply, 413, 'body_too_large', { limit: options.maxBodyBytes });
    }
    if (error.statusCode !== undefined && error.statusCode >= 400 && error.statusCode < 500) {
      return refuse(reply, error.statusCode, 'bad_request', { code: error.code });
    }
    log.error({ err: error }, 'webhook receiver failed');
    return reply.code(500).send({ error: 'internal' });
  });

  app.route({
    method: [...OTHER_METHODS],
    url: options.path,
    handler: async (_request, reply) => {
      reply.header('allow', 'POST');
      return refuse(reply, 405, 'method_not_allowed');
    },
  });

  app.post(options.path, { onRequest: typeProvesNothing }, async (request, reply) => {
    // The delivery's age is judged at its arrival (its body read), once: a reload of the secrets
    // below may wait up to the commit timeout, which must not count against the tolerance.
    const arrivedSeconds = nowSeconds();
    // No body at all is parsed as nothing: the empty body, which the signature then judges.
    const body = Buffer.isBuffer(request.body) ? request.body : EMPTY_BODY;
    const signed = {
      timestamp: header(request.headers['x-ee-timestamp']),
      signature: header(request.headers['x-ee-signature']),
      body,
    };
    const verify = () =>
      verifyDelivery(signed, options.secrets(), {
        nowSeconds: arrivedSeconds,
        toleranceSeconds: options.toleranceSeconds,
      });
    let verified = verify();
    if (!verified.ok && verified.reason === 'bad_signature' && (await options.reloadSecrets?.())) {
      verified = verify();
    }
    if (!verified.ok) {
      return refuse(reply, 401, verified.reason, { skewSeconds: roundSkew(verified.skewSeconds) });
    }
    metrics?.webhookClockSkew.observe(Math.abs(verified.skewSeconds));

    const eventHeader = headerEventType(request.headers['x-ee-event']);
    const parsed = parseEvent(body, eventHeader);
    if (!parsed.ok && parsed.reason === 'ignored_event_type') {
      metrics?.webhookRefusals.inc({ reason: parsed.reason });
      log.warn(
        { eventType: parsed.eventType.slice(0, LOGGED_TYPE_CHARS), ip: request.ip },
        'webhook delivery ignored: not a review.created event',
      );
      return reply.code(200).send({ status: 'ignored' });
    }
    if (!parsed.ok) return refuse(reply, 400, parsed.reason, { detail: parsed.detail });
    const observedAt = new Date(
      versionTime(verified.timestamp, arrivedSeconds, parsed.event.timestamp) * 1000,
    );
    // The signed body says review.created, the unsigned header another type: which one it is
    // cannot be told, so it is neither stored nor acknowledged.
    if (eventHeader !== undefined && eventHeader !== REVIEW_CREATED) {
      return refuse(reply, 400, 'invalid_event', { detail: 'X-EE-Event is not review.created' });
    }

    try {
      const outcome = await options.inbox.submit({
        event: parsed.event,
        // Exactly the bytes signed: parseEvent took them only as valid UTF-8 (a BOM kept).
        body: body.toString('utf8'),
        observedAt,
      });
      return reply.code(200).send({ status: outcome });
    } catch (error) {
      const reason: WebhookRefusalReason =
        error instanceof InboxClosedError
          ? 'shutting_down'
          : error instanceof InboxTimeoutError
            ? 'commit_timeout' // counted by the inbox, once per delivery of the batch
            : 'commit_failed';
      if (reason !== 'commit_timeout') metrics?.webhookRefusals.inc({ reason });
      // The platform retries a 5xx; the poll catches what it finally drops.
      return reply.code(503).send({ error: reason });
    }
  });

  return app;
}

const EMPTY_BODY = Buffer.alloc(0);

/**
 * Fastify refuses a content type it cannot parse (an empty one too) with a 415 before any parser
 * is chosen: every delivery that has one is read as bytes, so only its signature judges it. Set
 * on the raw headers, which Fastify reads them from: assigned to `request.headers`, they would be
 * merged into a new object at every read of a header.
 */
function typeProvesNothing(request: FastifyRequest, _reply: FastifyReply, done: () => void): void {
  if (request.raw.headers['content-type'] !== undefined) {
    request.raw.headers['content-type'] = 'application/octet-stream';
  }
  done();
}

function header(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

function roundSkew(skew: number | undefined): number | undefined {
  return skew === undefined ? undefined : Math.round(skew);
}
