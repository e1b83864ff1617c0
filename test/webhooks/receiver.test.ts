import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/connect.js';
import { makeLogger, SecretScrubber } from '../../src/log.js';
import { makeMetrics } from '../../src/metrics.js';
import { toReviewRow } from '../../src/mirror/reviewRow.js';
import { upsertReviews } from '../../src/mirror/reviewsSql.js';
import { Inbox } from '../../src/webhooks/inbox.js';
import { makeWebhookServer } from '../../src/webhooks/server.js';
import { deliveryHeaders, signDelivery } from '../../src/webhooks/signature.js';
import { freshDb } from '../helpers/db.js';
import { makeReview, signedDelivery } from './helpers.js';

const SECRET = 'whsec_receiver_test_secret_A';
const NEW_SECRET = 'whsec_receiver_test_secret_B';
const PATH = '/webhooks/review-created';
const MAX_BODY = 16 * 1024;

describe('webhook receiver over HTTP', () => {
  let db: Db;
  let app: FastifyInstance;
  let inbox: Inbox;
  let url: string;
  let secrets: string[] = [SECRET];
  const metrics = makeMetrics();
  const logLines: string[] = [];

  beforeAll(async () => {
    db = await freshDb();
    const scrubber = new SecretScrubber();
    const log = makeLogger({
      level: 'info',
      scrubber,
      destination: new Writable({
        write(chunk, _enc, cb) {
          logLines.push(String(chunk));
          cb();
        },
      }),
    });
    inbox = new Inbox({ db, log, metrics });
    app = makeWebhookServer({
      path: PATH,
      toleranceSeconds: 300,
      maxBodyBytes: MAX_BODY,
      secrets: () => secrets,
      inbox,
      log,
      metrics,
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}${PATH}`;
  });
  afterAll(async () => {
    await app?.close();
    await inbox?.close();
    await db?.close();
  });

  const post = (headers: Record<string, string>, body: string | Buffer, method = 'POST') =>
    fetch(url, { method, headers, body: method === 'GET' ? undefined : body });
  const stored = async (id: string) => ({
    reviews: Number((await db.knex(db.table('reviews')).where({ id }).count({ n: '*' }))[0]!.n),
    inbox: Number(
      (await db.knex(db.table('webhook_inbox')).where({ review_id: id }).count({ n: '*' }))[0]!.n,
    ),
  });
  const refusals = async (reason: string) =>
    (await metrics.webhookRefusals.get()).values.find((v) => v.labels.reason === reason)?.value ?? 0;

  it('stores an accepted delivery before answering 200: the review and the raw event', async () => {
    const review = makeReview();
    const d = signedDelivery(SECRET, review);
    const res = await post(d.headers, d.body);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: 'accepted' });
    const row = await db.knex(db.table('reviews')).where({ id: review.id }).first();
    expect(row).toMatchObject({ source: 'webhook', comment: review.comment, reviewer_name: 'Zoë' });
    expect(row.observed_at.getTime()).toBe(Number(d.headers['x-ee-timestamp']) * 1000);
    const event = await db.knex(db.table('webhook_inbox')).where({ review_id: review.id }).first();
    expect(event.body).toBe(d.body);
    expect(event.event).toBe('review.created');
  });

  it('accepts any content type, or none: the signature covers the bytes, the type proves nothing', async () => {
    for (const contentType of [
      'application/json; charset=utf-8',
      'text/plain',
      'application/x-www-form-urlencoded',
      'application/octet-stream',
      undefined,
      // Fastify cannot parse these: read like none all the same.
      '',
      'json',
    ]) {
      const review = makeReview();
      const d = signedDelivery(SECRET, review);
      const { 'content-type': _, ...headers } = d.headers;
      // A body given as bytes makes fetch send no content type of its own.
      const res = await post(
        contentType === undefined ? headers : { ...headers, 'content-type': contentType },
        Buffer.from(d.body),
      );
      expect(res.status, contentType).toBe(200);
      expect(await stored(review.id)).toEqual({ reviews: 1, inbox: 1 });
    }
  });

  it('takes a body that starts with a UTF-8 byte order mark, and stores it as signed, the mark kept', async () => {
    const review = makeReview();
    const body = `\uFEFF${JSON.stringify({ event: 'review.created', timestamp: '1', data: review })}`;
    const d = signedRaw(body);
    const res = await post(d.headers, d.body);
    expect(await res.json()).toEqual({ status: 'accepted' });
    // Compared by the database: the embedded one's client drops a leading BOM from text it reads.
    const event = await db.knex(db.table('webhook_inbox')).where({ review_id: review.id, body }).first();
    expect(event).toBeDefined();
  });

  it('reads a repeated or empty X-EE-Event as the types it names, refusing only another one', async () => {
    // Node joins a repeated header with commas: fetch sends it so.
    for (const [eventHeader, status] of [
      ['review.created, review.created', 200],
      ['', 200],
      [' , ', 200],
      ['review.created, review.updated', 400],
    ] as const) {
      const review = makeReview();
      const d = signedDelivery(SECRET, review);
      const res = await post({ ...d.headers, 'x-ee-event': eventHeader }, d.body);
      expect(res.status, eventHeader).toBe(status);
      expect((await stored(review.id)).reviews, eventHeader).toBe(status === 200 ? 1 : 0);
    }
  });

  it('accepts a delivery signed twice (the platform rotating its secret) when one signature matches', async () => {
    const review = makeReview();
    const d = signedDelivery(SECRET, review);
    const other = signDelivery('whsec_the_platforms_next_secret', d.headers['x-ee-timestamp']!, d.body);
    const res = await post(
      { ...d.headers, 'x-ee-signature': `${other}, ${d.headers['x-ee-signature']}` },
      d.body,
    );
    expect(res.status).toBe(200);
    expect(await stored(review.id)).toEqual({ reviews: 1, inbox: 1 });
  });

  it('acknowledges an authentic event of another type without storing it, counts it and logs its type', async () => {
    const review = makeReview();
    const longType = `review.${'x'.repeat(200)}`;
    const before = await refusals('ignored_event_type');
    const linesBefore = logLines.length;
    const cases = [
      // Typed by the signed body, whatever the header says.
      signedRaw(JSON.stringify({ event: 'review.updated', timestamp: '1', data: review })),
      // Typed by the header when the body names none, whatever its shape.
      { ...signedRaw('not json at all'), extra: { 'x-ee-event': 'review.deleted' } },
      { ...signedRaw(JSON.stringify({ data: { id: 'no review' } })), extra: { 'x-ee-event': longType } },
    ];
    for (const c of cases) {
      const extra = 'extra' in c ? c.extra : { 'x-ee-event': 'review.created' };
      const res = await post({ ...c.headers, ...extra }, c.body);
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ status: 'ignored' });
    }
    expect(await stored(review.id)).toEqual({ reviews: 0, inbox: 0 });
    expect(await refusals('ignored_event_type')).toBe(before + 3);
    const ignored = logLines
      .slice(linesBefore)
      .map((l) => JSON.parse(l))
      .filter((l) => l.msg === 'webhook delivery ignored: not a review.created event');
    expect(ignored.map((l) => [l.level, l.eventType])).toEqual([
      ['warn', 'review.updated'],
      ['warn', 'review.deleted'],
      ['warn', longType.slice(0, 64)],
    ]);
    expect(logLines.slice(linesBefore).join('\n')).not.toContain('no review');
  });

  it('answers 200 to a duplicate and changes nothing but last_seen_at', async () => {
    const review = makeReview();
    const d = signedDelivery(SECRET, review);
    expect((await post(d.headers, d.body)).status).toBe(200);
    const before = await db.knex(db.table('reviews')).where({ id: review.id }).first();
    const again = await post(d.headers, d.body);
    expect(again.status).toBe(200);
    expect(await again.json()).toEqual({ status: 'duplicate' });
    const after = await db.knex(db.table('reviews')).where({ id: review.id }).first();
    const { last_seen_at: seenBefore, ...restBefore } = before;
    const { last_seen_at: seenAfter, ...restAfter } = after;
    expect(restAfter).toEqual(restBefore);
    expect(seenAfter.getTime()).toBeGreaterThanOrEqual(seenBefore.getTime());
    expect(await stored(review.id)).toEqual({ reviews: 1, inbox: 1 });
  });

  it('never lets an older delivery overwrite newer data', async () => {
    const now = Math.floor(Date.now() / 1000);
    const newer = makeReview({ comment: 'newer' });
    const older = { ...newer, comment: 'older' };
    const dNewer = signedDelivery(SECRET, newer, { timestamp: now, eventTimestamp: now });
    const dOlder = signedDelivery(SECRET, older, { timestamp: now - 60 });
    expect((await post(dNewer.headers, dNewer.body)).status).toBe(200);
    expect((await post(dOlder.headers, dOlder.body)).status).toBe(200);
    const row = await db.knex(db.table('reviews')).where({ id: newer.id }).first();
    expect(row.comment).toBe('newer');
  });

  it('accepts the old and the new secret during a rotation, and only the new one after', async () => {
    secrets = [NEW_SECRET, SECRET];
    const a = makeReview();
    const b = makeReview();
    const dOld = signedDelivery(SECRET, a);
    const dNew = signedDelivery(NEW_SECRET, b);
    expect((await post(dOld.headers, dOld.body)).status).toBe(200);
    expect((await post(dNew.headers, dNew.body)).status).toBe(200);
    secrets = [NEW_SECRET];
    const c = makeReview();
    const dLate = signedDelivery(SECRET, c);
    expect((await post(dLate.headers, dLate.body)).status).toBe(401);
    expect(await stored(c.id)).toEqual({ reviews: 0, inbox: 0 });
    secrets = [SECRET];
  });

  // A platform may keep a delivery's body and sign each retry anew (spec 6.4 retries after 1, 5
  // and 30 minutes): the body's own time then lags the header's. Taken, and dated by the body's
  // time where that reads as Unix seconds at most a week before the signed one.
  it.each([
    ['a retry signed anew, its body from 31 minutes before', (now: number) => now - 31 * 60, -31 * 60],
    ['a body timestamp in milliseconds', (now: number) => now * 1000, 0],
    ['a body timestamp after the signed time', (now: number) => now + 60, 0],
    ['a body timestamp from 8 days before', (now: number) => now - 8 * 86_400, 0],
  ])('takes %s, dated accordingly', async (_name, bodyTime, offset) => {
    const now = Math.floor(Date.now() / 1000);
    const review = makeReview();
    const d = signedDelivery(SECRET, review, { timestamp: now, eventTimestamp: bodyTime(now) });
    const res = await post(d.headers, d.body);
    expect(await res.json()).toEqual({ status: 'accepted' });
    const row = await db.knex(db.table('reviews')).where({ id: review.id }).first();
    expect(row.observed_at.getTime()).toBe((now + offset) * 1000);
    const inbox = await db.knex(db.table('webhook_inbox')).where({ review_id: review.id }).first();
    expect(inbox.event_at.getTime()).toBe((now + offset) * 1000);
  });

  it("never overwrites, with a retry of the event's body, what the feed read after the event", async () => {
    const now = Math.floor(Date.now() / 1000);
    // Submitted 36 minutes ago; the first delivery failed, the poll read a later version 9 minutes
    // after the event, and will not read it again before the reconcile (its overlap is 10 minutes).
    const eventAt = now - 36 * 60;
    const asDelivered = makeReview({ comment: 'first version', is_verified: false });
    const asPolled = { ...asDelivered, comment: 'later version', is_verified: true };
    await upsertReviews(db.knex, db, [toReviewRow(asPolled, new Date((eventAt + 9 * 60) * 1000))], 'feed');
    // The platform's last retry: the event's body as it was, signed anew now.
    const d = signedDelivery(SECRET, asDelivered, { timestamp: now, eventTimestamp: eventAt });
    expect((await post(d.headers, d.body)).status).toBe(200);
    const row = await db.knex(db.table('reviews')).where({ id: asDelivered.id }).first();
    expect({ comment: row.comment, is_verified: row.is_verified }).toEqual({
      comment: 'later version',
      is_verified: true,
    });
  });

  it('takes a body without a timestamp, or with one not a number', async () => {
    for (const timestamp of [undefined, 'yesterday']) {
      const review = makeReview();
      const body = JSON.stringify({ event: 'review.created', timestamp, data: review });
      const headers = deliveryHeaders(SECRET, String(Math.floor(Date.now() / 1000)), body);
      expect(await (await post(headers, body)).json()).toEqual({ status: 'accepted' });
      expect(await stored(review.id)).toEqual({ reviews: 1, inbox: 1 });
    }
  });

  it('dates a version by the signed time, never later than its arrival, so a later feed reading wins', async () => {
    // Signed 4 minutes ahead: within the tolerance, yet it must not outrank what the feed reads next.
    const ahead = Math.floor(Date.now() / 1000) + 240;
    const review = makeReview({ comment: 'from a fast clock' });
    const d = signedDelivery(SECRET, review, { timestamp: ahead });
    const before = Date.now();
    expect((await post(d.headers, d.body)).status).toBe(200);
    const row = await db.knex(db.table('reviews')).where({ id: review.id }).first();
    expect(row.observed_at.getTime()).toBeLessThanOrEqual(Date.now());
    expect(row.observed_at.getTime()).toBeGreaterThanOrEqual(before - 1_000);
    const inbox = await db.knex(db.table('webhook_inbox')).where({ review_id: review.id }).first();
    expect(inbox.event_at.getTime()).toBe(row.observed_at.getTime());
  });

  describe('refuses without storing anything', () => {
    const cases: Array<{
      name: string;
      status: number;
      reason: string;
      build: (id: ReturnType<typeof makeReview>) => {
        headers: Record<string, string>;
        body: string | Buffer;
      };
      method?: string;
    }> = [
      {
        name: 'missing signature',
        status: 401,
        reason: 'missing_signature',
        build: (r) => {
          const d = signedDelivery(SECRET, r);
          const { 'x-ee-signature': _, ...headers } = d.headers;
          return { headers, body: d.body };
        },
      },
      {
        name: 'missing timestamp',
        status: 401,
        reason: 'missing_timestamp',
        build: (r) => {
          const d = signedDelivery(SECRET, r);
          const { 'x-ee-timestamp': _, ...headers } = d.headers;
          return { headers, body: d.body };
        },
      },
      {
        name: 'signature by an unknown secret',
        status: 401,
        reason: 'bad_signature',
        build: (r) => signedDelivery('whsec_someone_else', r),
      },
      {
        name: 'body changed after signing',
        status: 401,
        reason: 'bad_signature',
        build: (r) => {
          const d = signedDelivery(SECRET, r);
          return { headers: d.headers, body: d.body.replace('"rating":4.5', '"rating":1.5') };
        },
      },
      {
        name: 'uppercase hex signature',
        status: 401,
        reason: 'bad_signature',
        build: (r) => {
          const d = signedDelivery(SECRET, r);
          const sig = d.headers['x-ee-signature']!;
          return {
            headers: { ...d.headers, 'x-ee-signature': `sha256=${sig.slice(7).toUpperCase()}` },
            body: d.body,
          };
        },
      },
      {
        name: 'stale timestamp',
        status: 401,
        reason: 'stale_timestamp',
        build: (r) => signedDelivery(SECRET, r, { timestamp: Math.floor(Date.now() / 1000) - 3600 }),
      },
      {
        name: 'timestamp from the future',
        status: 401,
        reason: 'stale_timestamp',
        build: (r) => signedDelivery(SECRET, r, { timestamp: Math.floor(Date.now() / 1000) + 3600 }),
      },
      {
        name: 'signed body that is not JSON',
        status: 400,
        reason: 'invalid_json',
        build: (r) => signedRaw(`{"event":"review.created","data":{"id":"${r.id}"`),
      },
      {
        name: 'signed body that is not JSON, under an empty X-EE-Event',
        status: 400,
        reason: 'invalid_json',
        build: (r) => {
          const d = signedRaw(`{"event":"review.created","data":{"id":"${r.id}"`);
          return { headers: { ...d.headers, 'x-ee-event': '' }, body: d.body };
        },
      },
      {
        // Decoded as declared or with U+FFFD, the text stored would no longer be the bytes signed.
        name: 'signed body that is not UTF-8 (ISO-8859-1, as declared)',
        status: 400,
        reason: 'invalid_json',
        build: (r) => {
          const body = Buffer.from(
            JSON.stringify({ event: 'review.created', timestamp: '1', data: r }),
            'latin1',
          );
          return {
            headers: { ...signedRaw(body).headers, 'content-type': 'application/json; charset=iso-8859-1' },
            body,
          };
        },
      },
      {
        name: 'signed JSON that is not a valid review event',
        status: 400,
        reason: 'invalid_event',
        build: (r) =>
          signedRaw(JSON.stringify({ event: 'review.created', timestamp: '1', data: { ...r, rating: 'x' } })),
      },
      {
        // Valid ISO 8601, but PostgreSQL has no year zero: refused here, not by a failed commit.
        name: 'signed review with a created_at the database cannot store',
        status: 400,
        reason: 'invalid_event',
        build: (r) => signedDelivery(SECRET, { ...r, created_at: '0000-01-01T00:00:00Z' }),
      },
      {
        name: 'body over the limit',
        status: 413,
        reason: 'body_too_large',
        build: (r) => {
          const d = signedDelivery(SECRET, { ...r, comment: 'x'.repeat(MAX_BODY) });
          return d;
        },
      },
      {
        name: 'wrong method',
        status: 405,
        reason: 'method_not_allowed',
        method: 'PUT',
        build: (r) => signedDelivery(SECRET, r),
      },
      {
        name: 'another event type, unsigned',
        status: 401,
        reason: 'missing_signature',
        build: (r) => {
          const d = signedRaw(JSON.stringify({ event: 'review.updated', timestamp: '1', data: r }));
          const { 'x-ee-signature': _, ...headers } = d.headers;
          return { headers: { ...headers, 'x-ee-event': 'review.updated' }, body: d.body };
        },
      },
      {
        name: 'another event type, signed by an unknown secret',
        status: 401,
        reason: 'bad_signature',
        build: (r) => {
          const body = JSON.stringify({ event: 'review.updated', timestamp: '1', data: r });
          const timestamp = String(Math.floor(Date.now() / 1000));
          return {
            headers: {
              ...deliveryHeaders('whsec_someone_else', timestamp, body),
              'x-ee-event': 'review.updated',
            },
            body,
          };
        },
      },
      {
        name: 'a signed review.created body under another X-EE-Event',
        status: 400,
        reason: 'invalid_event',
        build: (r) => {
          const d = signedDelivery(SECRET, r);
          return { headers: { ...d.headers, 'x-ee-event': 'review.updated' }, body: d.body };
        },
      },
      {
        name: 'body over the limit, without a content type',
        status: 413,
        reason: 'body_too_large',
        build: (r) => {
          const d = signedDelivery(SECRET, { ...r, comment: 'x'.repeat(MAX_BODY) });
          const { 'content-type': _, ...headers } = d.headers;
          return { headers, body: Buffer.from(d.body) };
        },
      },
    ];

    for (const c of cases) {
      it(`${c.name}: ${c.status}`, async () => {
        const review = makeReview();
        const before = await refusals(c.reason);
        const { headers, body } = c.build(review);
        const res = await post(headers, body, c.method);
        expect(res.status).toBe(c.status);
        expect(await res.json()).toEqual({ error: c.reason });
        expect(await stored(review.id)).toEqual({ reviews: 0, inbox: 0 });
        expect(await refusals(c.reason)).toBe(before + 1);
      });
    }

    it('GET: 405 with Allow: POST', async () => {
      const res = await fetch(url);
      expect(res.status).toBe(405);
      expect(res.headers.get('allow')).toBe('POST');
    });

    it('POST without a body or a content type: 401, judged by its (missing) signature', async () => {
      const res = await fetch(url, { method: 'POST' });
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual({ error: 'missing_signature' });
    });

    it('logs each refusal with its reason and never the secret', async () => {
      const review = makeReview();
      const d = signedDelivery('whsec_someone_else', review);
      await post(d.headers, d.body);
      const refusalsLogged = logLines
        .map((l) => JSON.parse(l))
        .filter((l) => l.msg === 'webhook delivery refused');
      expect(refusalsLogged.some((l) => l.reason === 'bad_signature' && l.status === 401)).toBe(true);
      expect(logLines.join('\n')).not.toContain(SECRET);
    });
  });

  it('answers 503 for a delivery the database refuses, without failing those committed with it', async () => {
    // Validation passes nothing the schema cannot store, so a constraint added for this test plays
    // the database refusing one delivery.
    const reviews = db.table('reviews');
    await db.knex.raw(`alter table ?? add constraint refuses_poison check (review_number <> 'POISON')`, [
      reviews,
    ]);
    const poisoned = makeReview({ review_number: 'POISON' });
    const good = Array.from({ length: 20 }, () => makeReview());
    const responses = await Promise.all(
      [poisoned, ...good].map((r) => {
        const d = signedDelivery(SECRET, r);
        return post(d.headers, d.body);
      }),
    ).finally(() => db.knex.raw('alter table ?? drop constraint refuses_poison', [reviews]));
    expect(responses[0]!.status).toBe(503);
    expect(responses.slice(1).map((r) => r.status)).toEqual(good.map(() => 200));
    expect(await stored(poisoned.id)).toEqual({ reviews: 0, inbox: 0 });
    for (const r of good) expect(await stored(r.id)).toEqual({ reviews: 1, inbox: 1 });
  });

  it('groups concurrent deliveries into fewer commits, each answered after its commit', async () => {
    const batchesBefore = (await metrics.webhookBatchSize.get()).values.find((v) =>
      v.metricName?.endsWith('_count'),
    )?.value;
    const reviews = Array.from({ length: 200 }, () => makeReview());
    const responses = await Promise.all(
      reviews.map(async (r) => {
        const d = signedDelivery(SECRET, r);
        const res = await post(d.headers, d.body);
        // The 200 came after COMMIT: the row is visible to another connection right now.
        const count = res.status === 200 ? (await stored(r.id)).reviews : -1;
        return { status: res.status, count };
      }),
    );
    expect(responses.every((r) => r.status === 200 && r.count === 1)).toBe(true);
    const batchesAfter = (await metrics.webhookBatchSize.get()).values.find((v) =>
      v.metricName?.endsWith('_count'),
    )?.value;
    expect((batchesAfter ?? 0) - (batchesBefore ?? 0)).toBeLessThan(reviews.length);
  });
});

function signedRaw(body: string | Buffer) {
  const timestamp = String(Math.floor(Date.now() / 1000));
  return {
    body,
    headers: {
      'content-type': 'application/json',
      'x-ee-timestamp': timestamp,
      'x-ee-signature': signDelivery(SECRET, timestamp, body),
    },
  };
}
