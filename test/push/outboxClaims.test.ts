import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/connect.js';
import { SecretScrubber } from '../../src/log.js';
import type { PartnerApi } from '../../src/partner-api/client.js';
import { OutboxSender } from '../../src/push/events/outboxSender.js';
import { enqueueEvents } from '../../src/push/events/outboxSql.js';
import { freshDb, POSTGRES_URL } from '../helpers/db.js';
import { type FakePlatform, startFakePlatform } from '../helpers/fakePlatform.js';
import { capturedLog, quietLog } from '../helpers/log.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { waitFor } from '../helpers/wait.js';
import { testApi } from '../pull/helpers.js';
import { newEvent } from './helpers.js';

const FAST = { baseDelayMs: 5, maxDelayMs: 50 } as const;
const REDIRECT_BACKOFF = { baseDelayMs: 5, maxDelayMs: 60_000 } as const;

/**
 * The claims of the outbox against the sandbox over real HTTP and the real PostgreSQL server:
 * a row is sent only while its replica surely holds its claim, a lapsed claim's outcome is not
 * written over the new holder's, and a long drain still takes a dead replica's claims back.
 */
describe('outbox claims', () => {
  let sandbox: TestSandbox;
  let db: Db;
  const apis: PartnerApi[] = [];
  beforeAll(async () => {
    sandbox = await testSandbox({ seed: 41 });
    db = await freshDb({ url: POSTGRES_URL });
  });
  afterAll(async () => {
    for (const api of apis) await api.close();
    await db?.close();
    await sandbox?.close();
  });

  const sender = (worker: string, leaseMs: number, over: { log?: typeof quietLog; rate?: number } = {}) => {
    const api = testApi(sandbox, { retry: { maxRetries: 5, budgetMs: 30_000, ...FAST } });
    apis.push(api);
    return new OutboxSender(
      { db, api, log: over.log ?? quietLog, scrubber: new SecretScrubber() },
      {
        worker,
        concurrency: 1,
        ratePerSecond: over.rate ?? 100,
        leaseMs,
        policy: { unknownOutcome: 'retry', maxAttempts: 10, ...FAST },
      },
    );
  };
  const received = async (prefix: string) => {
    const counts = new Map<string, number>();
    for (const e of (await sandbox.control.truth(sandbox.companyId)).events) {
      const k = String(e.metadata?.key ?? '');
      if (k.startsWith(prefix)) counts.set(k, (counts.get(k) ?? 0) + 1);
    }
    return counts;
  };
  const rows = (prefix: string) =>
    db
      .knex(db.table('events_outbox'))
      .where('idempotency_key', 'like', `${prefix}%`)
      .orderBy('idempotency_key')
      .select('idempotency_key', 'state', 'possible_duplicate');

  it('a 429 whose Retry-After outlasts the claim: no second replica sends the event too, nor those queued behind it', {
    timeout: 30_000,
  }, async () => {
    const LEASE_MS = 2_000;
    const keys = ['lease-1', 'lease-2', 'lease-3'];
    await enqueueEvents(
      db.knex,
      db,
      keys.map((k) => newEvent(k)),
    );
    await sandbox.control.setFaults({
      partner: { error429: 1, retryAfterSeconds: 4, routes: ['/api/v1/partner/events'] },
    });
    const a = sender('replica-a', LEASE_MS);
    const b = sender('replica-b', LEASE_MS);
    // A claims all three; the first one's POST is answered 429, and its client waits 4 s.
    const draining = a.drain();
    await waitFor(
      async () =>
        ((await sandbox.control.requests()).by_route['POST /api/v1/partner/events']?.['429'] ?? 0) > 0,
      10_000,
      10,
    );
    await sandbox.control.setFaults({});
    // B drains once A's claims would have lapsed.
    await sleep(LEASE_MS + 500);
    await b.drain();
    await draining;
    await waitFor(async () => {
      await b.drain();
      return (await rows('lease-')).every((r) => r.state === 'sent');
    }, 15_000);
    expect(Object.fromEntries(await received('lease-'))).toEqual({
      'lease-1': 1,
      'lease-2': 1,
      'lease-3': 1,
    });
    expect((await rows('lease-')).filter((r) => r.possible_duplicate)).toEqual([]);
  });

  it('an outcome that arrives after the claim was taken back is not recorded, and says so loudly', async () => {
    await enqueueEvents(db.knex, db, [newEvent('late-1')]);
    const { log, lines } = capturedLog();
    // The platform takes the event at once and answers 800 ms later.
    await sandbox.control.setFaults({
      partner: { lateAnswer: 1, delayMs: 800, routes: ['/api/v1/partner/events'] },
    });
    try {
      const draining = sender('replica-c', 60_000, { log }).drain();
      await waitFor(async () => (await received('late-')).get('late-1') === 1, 10_000, 10);
      // Another replica took the claim back and claimed the event itself (here without waiting
      // for the lease to run out).
      await db
        .knex(db.table('events_outbox'))
        .where({ idempotency_key: 'late-1' })
        .update({ claimed_by: 'replica-d', possible_duplicate: true });
      await draining;
    } finally {
      await sandbox.control.setFaults({});
    }
    expect(await rows('late-')).toEqual([
      { idempotency_key: 'late-1', state: 'sending', possible_duplicate: true },
    ]);
    expect(lines.filter((l) => l.level === 'error')).toEqual([
      expect.objectContaining({
        idempotency_key: 'late-1',
        msg: 'event outcome not recorded: this replica no longer holds its claim; another replica may send it again (possible duplicate)',
      }),
    ]);
    await db.knex(db.table('events_outbox')).where({ idempotency_key: 'late-1' }).del();
  });

  it("takes a dead replica's claims back during a drain that never ends, and runs the housekeeping meanwhile", {
    timeout: 30_000,
  }, async () => {
    await enqueueEvents(db.knex, db, [newEvent('dead-claim')]);
    await db
      .knex(db.table('events_outbox'))
      .where({ idempotency_key: 'dead-claim' })
      .update({
        state: 'sending',
        claimed_by: 'dead-replica',
        attempts: 1,
        lease_expires_at: db.knex.raw("now() + interval '1 second'"),
      });
    await enqueueEvents(
      db.knex,
      db,
      Array.from({ length: 10 }, (_, i) => newEvent(`flow-${i}`)),
    );
    // Events keep coming faster than the sender's rate: its drain never runs out of work.
    let next = 10;
    const inflow = setInterval(() => void enqueueEvents(db.knex, db, [newEvent(`flow-${next++}`)]), 150);
    const stop = new AbortController();
    let housekept = 0;
    let ended = false;
    const draining = sender('replica-live', 1_000, { rate: 5 })
      .drain(stop.signal, async () => {
        housekept++;
      })
      .finally(() => {
        ended = true;
      });
    try {
      await waitFor(
        async () =>
          (await db.knex(db.table('events_outbox')).where({ idempotency_key: 'dead-claim' }).first('state'))
            ?.state === 'sent',
        10_000,
        50,
      );
      expect(ended).toBe(false);
      expect(housekept).toBeGreaterThan(0);
    } finally {
      clearInterval(inflow);
      stop.abort();
      await draining;
    }
    const dead = await db.knex(db.table('events_outbox')).where({ idempotency_key: 'dead-claim' }).first();
    // Taken back as an unknown outcome: the dead replica may have sent it.
    expect(dead).toMatchObject({ state: 'sent', possible_duplicate: true, attempts: 2 });
  });
});

describe('the outbox when the platform redirects', () => {
  let platform: FakePlatform;
  let db: Db;
  let api: PartnerApi;
  beforeAll(async () => {
    platform = await startFakePlatform(() => ({
      status: 301,
      body: '',
      headers: { location: 'https://platform.example/api/v1/partner/events?token=sk_test_redirect' },
    }));
    db = await freshDb({ url: POSTGRES_URL });
    api = testApi({ url: platform.url, apiKey: 'sk_test_redirect' });
  });
  afterAll(async () => {
    await api?.close();
    await db?.close();
    await platform?.close();
  });

  it('keeps the event pending without counting the attempt, saying the base URL is redirected', async () => {
    await enqueueEvents(db.knex, db, [newEvent('moved-1')]);
    const sender = new OutboxSender(
      { db, api, log: quietLog, scrubber: new SecretScrubber() },
      {
        worker: 'redirected',
        concurrency: 1,
        ratePerSecond: 100,
        leaseMs: 60_000,
        // A backoff no drain outlasts: with 50 ms a slow machine could claim it again in this one.
        policy: { unknownOutcome: 'retry', maxAttempts: 1, ...REDIRECT_BACKOFF },
      },
    );
    const attemptedFrom = Date.now();
    const counts = await sender.drain();
    expect(counts).toMatchObject({ sent: 0, failed: 0, retried: 1 });
    expect(platform.requests()).toBe(1);
    const row = await db.knex(db.table('events_outbox')).where({ idempotency_key: 'moved-1' }).first();
    expect(row).toMatchObject({ state: 'pending', attempts: 0, possible_duplicate: false });
    // Where it leads, without its query: a token there is not the mirror's to store.
    expect(row.last_error).toBe(
      "POST /events answered 301: redirected to https://platform.example/api/v1/partner/events, not followed: the platform's base URL (REVIEWS_API_URL) is redirected; set it to where it leads",
    );
    // Not due again before the longest backoff: an operator fixes the URL meanwhile. (Measured
    // from before the attempt: a busy machine may take longer than that backoff to get here.)
    expect(new Date(row.next_attempt_at).getTime()).toBeGreaterThanOrEqual(
      attemptedFrom + REDIRECT_BACKOFF.maxDelayMs,
    );
  });
});
