import { describe, expect, it } from 'vitest';
import { SecretScrubber } from '../../src/log.js';
import type { OutboxSender } from '../../src/push/events/outboxSender.js';
import { enqueueEvents, resolveEvent } from '../../src/push/events/outboxSql.js';
import type { UnknownOutcomePolicy } from '../../src/push/events/sendPolicy.js';
import { newEvent } from './helpers.js';
import { outboxGatewayFixture } from './outboxGateway.js';

/**
 * Unknown outcomes and outages over the real client, real HTTP and the real database: an answer
 * that may come after the platform acted is never taken for "not sent"; an event is sent at most
 * twice (once more after an unknown outcome, flagged), then parked; an outage the platform did not
 * act on fails nothing, however long.
 */
describe('outbox unknown outcomes and outages', () => {
  const fx = outboxGatewayFixture({ seed: 47 });
  const { row, received } = fx;

  const sender = (
    unknownOutcome: UnknownOutcomePolicy,
    { url = fx.sandbox.url, requestTimeoutMs = 2_000, maxAttempts = 10 } = {},
  ) =>
    fx.sender(
      { scrubber: new SecretScrubber() },
      { url, requestTimeoutMs },
      { worker: `unknown-${unknownOutcome}`, concurrency: 1, unknownOutcome, maxAttempts },
    );
  /**
   * Drains until a drain finds nothing to do, adding up the counts: a drain ends when nothing is due
   * as it looks, and an outcome written just after (due again at once) is the next drain's.
   */
  const drainAll = async (s: OutboxSender) => {
    const total = { sent: 0, retried: 0, failed: 0, parked: 0, possibleDuplicates: 0 };
    for (let i = 0; i < 20; i++) {
      const counts = await s.drain();
      for (const k of Object.keys(total) as Array<keyof typeof total>) total[k] += counts[k];
      if (counts.sent + counts.retried + counts.failed + counts.parked === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    return total;
  };

  it('a 502 from a gateway after the platform took the event: sent once more, flagged a possible duplicate (retry)', async () => {
    await enqueueEvents(fx.db.knex, fx.db, [newEvent('gw-retry')]);
    fx.gateway.badGateways = 1;
    const counts = await drainAll(sender('retry', { url: fx.gatewayUrl }));
    expect(counts).toMatchObject({ sent: 1, retried: 1, possibleDuplicates: 1 });
    // The platform has it twice, and the row says it may.
    expect(await received('gw-retry')).toBe(2);
    expect(await row('gw-retry')).toMatchObject({ state: 'sent', possible_duplicate: true, attempts: 2 });
  });

  it('a 502 after an outage of 503s longer than EVENTS_MAX_ATTEMPTS: still sent once more, flagged, not failed (retry)', async () => {
    await enqueueEvents(fx.db.knex, fx.db, [newEvent('gw-after-outage')]);
    // Six attempts the platform never saw (twice EVENTS_MAX_ATTEMPTS), then the first that reaches
    // it, whose answer a gateway loses.
    fx.gateway.unavailable = 6;
    fx.gateway.badGateways = 1;
    const counts = await drainAll(sender('retry', { url: fx.gatewayUrl, maxAttempts: 3 }));
    expect(fx.gateway).toMatchObject({ unavailable: 0, badGateways: 0 });
    expect(counts).toMatchObject({ sent: 1, retried: 7, failed: 0, parked: 0, possibleDuplicates: 1 });
    expect(await received('gw-after-outage')).toBe(2);
    expect(await row('gw-after-outage')).toMatchObject({
      state: 'sent',
      possible_duplicate: true,
      attempts: 8,
    });
  });

  it('a 502 after such an outage, and a 502 again: parked, the platform holding it twice, not three times (retry)', async () => {
    await enqueueEvents(fx.db.knex, fx.db, [newEvent('gw-after-outage-twice')]);
    fx.gateway.unavailable = 6;
    fx.gateway.badGateways = 2;
    const counts = await drainAll(sender('retry', { url: fx.gatewayUrl, maxAttempts: 3 }));
    expect(counts).toMatchObject({ sent: 0, retried: 7, failed: 0, parked: 1, possibleDuplicates: 1 });
    expect(await received('gw-after-outage-twice')).toBe(2);
    const parked = await row('gw-after-outage-twice');
    expect(parked).toMatchObject({ state: 'parked', possible_duplicate: true, attempts: 8 });
    expect(parked?.last_error).toMatch(/^outcome unknown again after it was sent again .* answered 502/);
  });

  it('a 502 from a gateway after the platform took the event: parked, sent once (park)', async () => {
    await enqueueEvents(fx.db.knex, fx.db, [newEvent('gw-park')]);
    fx.gateway.badGateways = 1;
    expect(await drainAll(sender('park', { url: fx.gatewayUrl }))).toMatchObject({ sent: 0, parked: 1 });
    expect(await received('gw-park')).toBe(1);
    const parked = await row('gw-park');
    expect(parked).toMatchObject({ state: 'parked', possible_duplicate: false, attempts: 1 });
    expect(parked?.last_error).toMatch(
      /^outcome unknown, parked for an operator: POST \/events answered 502/,
    );
  });

  it("an operator's retry of an event parked after an unknown outcome flags it: the platform may then have it twice (park)", async () => {
    await enqueueEvents(fx.db.knex, fx.db, [newEvent('gw-park-retried')]);
    fx.gateway.badGateways = 1;
    expect(await drainAll(sender('park', { url: fx.gatewayUrl }))).toMatchObject({ parked: 1 });
    expect(await row('gw-park-retried')).toMatchObject({ state: 'parked', possible_duplicate: false });
    expect(await resolveEvent(fx.db.knex, fx.db, 'gw-park-retried', 'retry')).toBe('pending');
    expect(await row('gw-park-retried')).toMatchObject({ state: 'pending', possible_duplicate: true });
    expect(await drainAll(sender('park', { url: fx.gatewayUrl }))).toMatchObject({ sent: 1, parked: 0 });
    expect(await received('gw-park-retried')).toBe(2);
    expect(await row('gw-park-retried')).toMatchObject({ state: 'sent', possible_duplicate: true });
  });

  it('a 500 is an unknown outcome: parked under park, sent once more then parked under retry', async () => {
    await enqueueEvents(fx.db.knex, fx.db, [newEvent('e500-park'), newEvent('e500-retry')]);
    await fx.sandbox.control.setFaults({ partner: { error500: 1, routes: ['/api/v1/partner/events'] } });
    try {
      await fx.db
        .knex(fx.db.table('events_outbox'))
        .where({ idempotency_key: 'e500-retry' })
        .update({
          next_attempt_at: fx.db.knex.raw("now() + interval '1 hour'"),
        });
      expect(await drainAll(sender('park'))).toMatchObject({ parked: 1, retried: 0 });
      expect(await row('e500-park')).toMatchObject({ state: 'parked', attempts: 1 });
      await fx.db.knex(fx.db.table('events_outbox')).where({ idempotency_key: 'e500-retry' }).update({
        next_attempt_at: fx.db.knex.fn.now(),
      });
      expect(await drainAll(sender('retry'))).toMatchObject({ retried: 1, parked: 1, possibleDuplicates: 1 });
      const parked = await row('e500-retry');
      expect(parked).toMatchObject({ state: 'parked', possible_duplicate: true, attempts: 2 });
      expect(parked?.last_error).toMatch(/^outcome unknown again after it was sent again/);
    } finally {
      await fx.sandbox.control.setFaults({});
    }
  });

  it('answers lost every time (lateAnswer past the timeout): the platform gets the event twice, not ten times, and it is parked', {
    timeout: 20_000,
  }, async () => {
    await enqueueEvents(fx.db.knex, fx.db, [newEvent('late')]);
    await fx.sandbox.control.setFaults({
      partner: { lateAnswer: 1, delayMs: 1_500, routes: ['/api/v1/partner/events'] },
    });
    try {
      const counts = await drainAll(sender('retry', { requestTimeoutMs: 300 }));
      expect(counts).toMatchObject({ sent: 0, retried: 1, parked: 1, failed: 0 });
    } finally {
      await fx.sandbox.control.setFaults({});
    }
    expect(await received('late')).toBe(2);
    const parked = await row('late');
    expect(parked).toMatchObject({ state: 'parked', possible_duplicate: true, attempts: 2 });
    expect(parked?.last_error).toMatch(/^outcome unknown again after it was sent again .* timed out/);
    // Nothing more is sent by later drains.
    expect(await drainAll(sender('retry'))).toMatchObject({ sent: 0, retried: 0, parked: 0 });
    expect(await received('late')).toBe(2);
  });

  it('an outage the platform did not act on (429s) outlasting EVENTS_MAX_ATTEMPTS fails nothing: sent once when it ends', {
    timeout: 20_000,
  }, async () => {
    await enqueueEvents(fx.db.knex, fx.db, [newEvent('outage-429')]);
    await fx.sandbox.control.setFaults({
      partner: { error429: 1, retryAfterSeconds: 0, routes: ['/api/v1/partner/events'] },
    });
    try {
      // At least six attempts refused with a 429 (three times EVENTS_MAX_ATTEMPTS).
      const s = sender('retry', { maxAttempts: 2 });
      while (((await row('outage-429'))?.attempts ?? 0) < 6) {
        expect(await s.drain()).toMatchObject({ sent: 0, failed: 0, parked: 0, possibleDuplicates: 0 });
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    } finally {
      await fx.sandbox.control.setFaults({});
    }
    const waiting = await row('outage-429');
    expect(waiting).toMatchObject({ state: 'pending', possible_duplicate: false });
    expect(waiting?.attempts).toBeGreaterThanOrEqual(6);
    expect(waiting?.last_error).toMatch(/answered 429/);
    expect(await received('outage-429')).toBe(0);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await drainAll(sender('retry', { maxAttempts: 2 }))).toMatchObject({
      sent: 1,
      possibleDuplicates: 0,
    });
    expect(await row('outage-429')).toMatchObject({ state: 'sent', possible_duplicate: false });
    expect(await received('outage-429')).toBe(1);
  });
});
