import type { Socket } from 'node:net';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import {
  CursorError,
  decodeListCursor,
  decodeReviewCursor,
  encodeListCursor,
  encodeReviewCursor,
  type ListCursor,
} from './cursor.js';
import type { FaultPlan } from './faults.js';
import {
  contactBody,
  eventBody,
  type InvalidReviewShape,
  locationBody,
  parseBody,
  professionalBody,
  webhookBody,
} from './schema.js';
import {
  type Company,
  locationJson,
  professionalJson,
  type ReviewRecord,
  reviewJson,
  SandboxError,
  type Store,
  webhookJson,
} from './store.js';

export interface PartnerRoutesOptions {
  store: Store;
  faults: FaultPlan;
  /** Accept `http://127.0.0.1` and `http://localhost` webhook URLs, for receivers under test. */
  allowHttpWebhooks: boolean;
  /** Sockets of requests held open by the `hang` fault, destroyed on close. */
  hung: Set<Socket>;
  countHang: (request: FastifyRequest) => void;
  /** Counts a request whose handler ran and whose answer (`status`) is held by `lateAnswer`. */
  countLate: (request: FastifyRequest, status: number) => void;
}

declare module 'fastify' {
  interface FastifyRequest {
    company?: Company;
    truncate?: boolean;
    /** Hold the answer this long after the handler ran (the `lateAnswer` fault). */
    lateAnswerMs?: number;
  }
}

const DEFAULT_LIMIT = 50;
const MAX_LIMIT = 100;
const LOCAL_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]']);

type Query = Record<string, string | string[] | undefined>;

/** One value of a query parameter; a repeated parameter is ambiguous and refused. */
function single(query: Query, name: string): string | undefined {
  const value = query[name];
  if (Array.isArray(value)) throw new SandboxError(422, `${name} must be given once`);
  return value;
}

export function parseLimit(raw: string | undefined): number {
  if (raw === undefined) return DEFAULT_LIMIT;
  const n = /^\d{1,4}$/.test(raw) ? Number(raw) : Number.NaN;
  if (!(n >= 1 && n <= MAX_LIMIT))
    throw new SandboxError(422, `limit must be an integer from 1 to ${MAX_LIMIT}`);
  return n;
}

const ISO_8601 = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2}))?$/i;

/** An ISO 8601 date, or date-time with a zone (a zoneless time would depend on the server's zone). */
export function parseSince(raw: string): number {
  const ms = ISO_8601.test(raw) ? Date.parse(raw) : Number.NaN;
  if (Number.isNaN(ms)) {
    throw new SandboxError(
      422,
      'since must be an ISO 8601 timestamp with a time zone, e.g. 2024-05-01T12:00:00Z',
    );
  }
  return ms;
}

function parseActive(raw: string | undefined): boolean | undefined {
  if (raw === undefined) return undefined;
  if (raw === 'true') return true;
  if (raw === 'false') return false;
  throw new SandboxError(422, 'active must be true or false');
}

/** A review as a buggy platform might serve it: one field out of the spec's shape. */
function invalidReviewJson(r: ReviewRecord, shape: InvalidReviewShape) {
  const json = reviewJson(r);
  if (shape === 'rating') return { ...json, rating: 7 };
  if (shape === 'created_at') return { ...json, created_at: 'not-a-date' };
  const { id: _id, ...withoutId } = json;
  return withoutId;
}

function cursorError(error: unknown): never {
  if (error instanceof CursorError) throw new SandboxError(422, error.message);
  throw error;
}

/** Cursor and `active` of a list request: a cursor carries its walk's filter, and a different one is refused. */
function listPosition(query: Query, kind: ListCursor['k']) {
  const limit = parseLimit(single(query, 'limit'));
  const active = parseActive(single(query, 'active'));
  const raw = single(query, 'cursor');
  if (raw === undefined || raw === '') return { limit, active: active ?? true, afterSeq: 0 };
  let cursor: ListCursor;
  try {
    cursor = decodeListCursor(raw, kind);
  } catch (error) {
    cursorError(error);
  }
  if (active !== undefined && active !== cursor.a) {
    throw new SandboxError(422, 'cursor was issued for a different active filter');
  }
  return { limit, active: cursor.a, afterSeq: cursor.n };
}

/**
 * The partner API of spec section 4 under /api/v1/partner. Hooks run in this order: faults
 * (as a load balancer or rate limiter in front of the platform would), then the API key.
 */
export async function partnerRoutes(app: FastifyInstance, options: PartnerRoutesOptions): Promise<void> {
  const { store, faults, allowHttpWebhooks } = options;

  app.addHook('onRequest', async (request, reply) => {
    const fault = faults.forPartnerRequest(request.url.split('?')[0]!, request.method);
    // A platform bug some clients meet in the field: error texts that quote the caller's key.
    const sentKey = String(request.headers['x-api-key'] ?? '(none)');
    const echo = (message: string) => (fault.echoKey ? `${message} for api key ${sentKey}` : message);
    if (fault.delayMs > 0) await new Promise((resolve) => setTimeout(resolve, fault.delayMs));
    switch (fault.outcome) {
      case 'hang': {
        const socket = request.raw.socket;
        options.hung.add(socket);
        socket.once('close', () => options.hung.delete(socket));
        options.countHang(request);
        return new Promise<never>(() => {});
      }
      case 'error500':
        return reply.code(500).send({ error: echo('Internal server error') });
      case 'error429':
      case 'error503': {
        const status = fault.outcome === 'error429' ? 429 : 503;
        // The wall clock, not the store's: a client compares an HTTP date with its own.
        const retryAfter = faults.retryAfterHeader(status, Date.now());
        if (retryAfter !== undefined) reply.header('retry-after', retryAfter);
        return reply
          .code(status)
          .send({ error: echo(status === 429 ? 'Too many requests' : 'Service unavailable') });
      }
      case 'truncated':
        request.truncate = true;
        break;
      case 'lateAnswer':
        request.lateAnswerMs = faults.current.partner?.delayMs ?? 1000;
        break;
      case 'pass':
        if (fault.echoKey) return reply.code(400).send({ error: `unknown parameter for api key ${sentKey}` });
        break;
    }
    request.company = store.authenticate(request.headers['x-api-key'] as string | undefined);
  });

  app.addHook('onSend', async (request, reply, payload) => {
    if (request.lateAnswerMs !== undefined) {
      options.countLate(request, reply.statusCode);
      await new Promise((resolve) => setTimeout(resolve, request.lateAnswerMs));
    }
    if (!request.truncate || typeof payload !== 'string') return payload;
    reply.code(200);
    return payload.slice(0, Math.floor(payload.length / 2));
  });

  const companyOf = (request: FastifyRequest): Company => request.company!;

  // --- reviews (4.3) ---

  app.get('/reviews', async (request) => {
    const query = request.query as Query;
    const limit = parseLimit(single(query, 'limit'));
    const rawSince = single(query, 'since');
    const sinceMs = rawSince === undefined ? null : parseSince(rawSince);
    const rawCursor = single(query, 'cursor');
    let after: { createdMs: number; id: string } | null = null;
    let walkSince = sinceMs;
    let repeat = 0;
    if (rawCursor !== undefined && rawCursor !== '') {
      let cursor: ReturnType<typeof decodeReviewCursor>;
      try {
        cursor = decodeReviewCursor(rawCursor);
      } catch (error) {
        cursorError(error);
      }
      if (rawSince !== undefined && cursor.s !== sinceMs) {
        throw new SandboxError(422, 'cursor was issued for a different since');
      }
      after = { createdMs: cursor.t, id: cursor.id };
      walkSince = cursor.s;
      repeat = cursor.r ?? 0;
    }
    const page = store.reviewPage(companyOf(request), { limit, after, sinceMs: walkSince });
    const last = page.reviews.at(-1);
    let hasMore = page.hasMore;
    let nextCursor = page.hasMore && last ? encodeReviewCursor(last, walkSince) : null;
    // Pages are numbered by position, so every walk with this limit meets the fault at the same page.
    const quirk = page.reviews.length > 0 ? faults.pageQuirk(Math.floor(page.offset / limit) + 1) : undefined;
    if (quirk === 'null_cursor' && hasMore) nextCursor = null;
    if (quirk === 'repeat_cursor' && rawCursor) {
      hasMore = true;
      nextCursor = rawCursor;
    }
    if (quirk === 'identical_page' && after !== null) {
      hasMore = true;
      nextCursor = encodeReviewCursor(after, walkSince, repeat + 1);
    }
    return {
      reviews: page.reviews.map((r) => {
        const broken = faults.invalidReviewShape(r.id);
        return broken === undefined ? reviewJson(r) : invalidReviewJson(r, broken);
      }),
      pagination: { count: page.reviews.length, has_more: hasMore, next_cursor: nextCursor },
    };
  });

  // --- locations (4.4) ---

  app.get('/locations', async (request) => {
    const position = listPosition(request.query as Query, 'locations');
    const page = store.listPage(companyOf(request).locations, position);
    const now = store.now();
    return {
      locations: page.items.map((l) => locationJson(l, now)),
      pagination: {
        count: page.items.length,
        has_more: page.hasMore,
        next_cursor: page.hasMore
          ? encodeListCursor('locations', page.items.at(-1)!.seq, position.active)
          : null,
      },
    };
  });

  app.get('/locations/:slug', async (request) => {
    const { slug } = request.params as { slug: string };
    const location = companyOf(request).locations.find((l) => l.slug === slug);
    if (location === undefined) throw new SandboxError(404, 'Location not found');
    return locationJson(location, store.now());
  });

  app.post('/locations', async (request, reply) => {
    const location = store.createLocation(companyOf(request), parseBody(locationBody, request.body));
    return reply.code(201).send(locationJson(location, store.now()));
  });

  // --- professionals (4.5) ---

  app.get('/professionals', async (request) => {
    const position = listPosition(request.query as Query, 'professionals');
    const page = store.listPage(companyOf(request).professionals, position);
    const now = store.now();
    return {
      professionals: page.items.map((p) => professionalJson(p, now, false)),
      pagination: {
        count: page.items.length,
        has_more: page.hasMore,
        next_cursor: page.hasMore
          ? encodeListCursor('professionals', page.items.at(-1)!.seq, position.active)
          : null,
      },
    };
  });

  app.get('/professionals/:slug', async (request) => {
    const { slug } = request.params as { slug: string };
    const professional = companyOf(request).professionals.find((p) => p.slug === slug);
    if (professional === undefined) throw new SandboxError(404, 'Professional not found');
    return professionalJson(professional, store.now(), true);
  });

  app.post('/professionals', async (request, reply) => {
    const professional = store.createProfessional(
      companyOf(request),
      parseBody(professionalBody, request.body),
    );
    return reply.code(201).send(professionalJson(professional, store.now(), true));
  });

  // --- contacts and events (4.1, 4.2) ---

  app.post('/contacts', async (request, reply) => {
    const { contact, created } = store.upsertContact(
      companyOf(request),
      parseBody(contactBody, request.body),
    );
    return reply.code(created ? 201 : 200).send({
      contact: {
        id: contact.id,
        email: contact.email,
        name: contact.name,
        external_id: contact.externalId,
        professional_id: contact.professionalId,
        created_at: new Date(contact.createdMs).toISOString(),
        updated_at: new Date(contact.updatedMs).toISOString(),
      },
      created,
    });
  });

  app.post('/events', async (request, reply) => {
    const event = store.recordEvent(companyOf(request), parseBody(eventBody, request.body));
    return reply.code(202).send({ id: event.id, status: 'queued' });
  });

  // --- webhooks (4.6) ---

  app.post('/webhook', async (request, reply) => {
    const input = parseBody(webhookBody, request.body);
    const url = URL.canParse(input.url) ? new URL(input.url) : undefined;
    const localHttp = url?.protocol === 'http:' && allowHttpWebhooks && LOCAL_HOSTS.has(url.hostname);
    if (url === undefined || (url.protocol !== 'https:' && !localHttp)) {
      throw new SandboxError(422, 'url must be an HTTPS URL');
    }
    const webhook = store.addWebhook(companyOf(request), input);
    const { id, url: target, events, is_active, created_at } = webhookJson(webhook);
    return reply
      .code(201)
      .send({ webhook: { id, url: target, events, is_active, created_at, signing_secret: webhook.secret } });
  });

  app.get('/webhook', async (request) => ({ webhooks: companyOf(request).webhooks.map(webhookJson) }));

  app.delete('/webhook', async (request) => {
    const id = single(request.query as Query, 'id');
    if (id === undefined || id === '') throw new SandboxError(422, 'id is required');
    store.deleteWebhook(companyOf(request), id);
    return { deleted: true };
  });
}
