import { describe, expect, it } from 'vitest';
import { SecretScrubber } from '../../src/log.js';
import { enqueueEvents, resolveEvent } from '../../src/push/events/outboxSql.js';
import { newEvent } from './helpers.js';
import { outboxGatewayFixture } from './outboxGateway.js';

/**
 * A 403 over the real client, real HTTP and the real database: one event refused while the key
 * is accepted (the client's check of the key, a GET, reaches the sandbox) fails that event with
 * the platform's text, scrubbed, not flagged, the others going on, and `events retry` sends it
 * again; a key refused everywhere (deactivated) fails nothing.
 */
describe('outbox events answered 403', () => {
  const fx = outboxGatewayFixture({ seed: 53 });
  const { row, received } = fx;

  /** A sender with a client of its own: the client keeps the key check's yes for a few seconds. */
  const sender = (url: string) =>
    fx.sender(
      { scrubber: new SecretScrubber([fx.sandbox.apiKey]) },
      { url },
      { worker: 'refusals', concurrency: 2 },
    );

  it('a 403 with the key accepted fails that event for good, unflagged, with the scrubbed text; events retry sends it', async () => {
    await enqueueEvents(fx.db.knex, fx.db, [newEvent('opted-out'), newEvent('opted-in')]);
    // The platform's text echoes the key: it must not reach the row.
    fx.gateway.refuse = (body) =>
      body.includes('opted-out@') ? `contact has opted out (key ${fx.sandbox.apiKey})` : undefined;
    const first = await sender(fx.gatewayUrl).drain();
    expect(first).toMatchObject({ sent: 1, failed: 1, retried: 0, parked: 0, possibleDuplicates: 0 });
    expect(await row('opted-out')).toEqual({
      state: 'failed',
      possible_duplicate: false,
      attempts: 1,
      last_error: 'POST /events answered 403: contact has opted out (key [REDACTED])',
    });
    expect(await received('opted-in')).toBe(1);
    // Not tried again by later drains, however short the backoff.
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await sender(fx.gatewayUrl).drain()).toMatchObject({ sent: 0, failed: 0, retried: 0 });

    // The person opted in again: an operator sends it once more.
    fx.gateway.refuse = () => undefined;
    expect(await resolveEvent(fx.db.knex, fx.db, 'opted-out', 'retry')).toBe('pending');
    expect(await sender(fx.gatewayUrl).drain()).toMatchObject({ sent: 1, failed: 0, possibleDuplicates: 0 });
    expect(await row('opted-out')).toMatchObject({ state: 'sent', possible_duplicate: false, attempts: 1 });
    expect(await received('opted-out')).toBe(1);
  });

  it('a 403 with the key refused too (deactivated) is an outage of the key: pending, the attempt not counted', async () => {
    await enqueueEvents(fx.db.knex, fx.db, [newEvent('key-off')]);
    await fx.sandbox.control.deactivateKey(fx.sandbox.apiKey);
    try {
      // Due again after the policy's maxDelayMs, a millisecond here: tried more than once.
      const refused = await sender(fx.sandbox.url).drain();
      expect(refused).toMatchObject({ sent: 0, failed: 0, parked: 0, possibleDuplicates: 0 });
      expect(refused.retried).toBeGreaterThanOrEqual(1);
      const waiting = await row('key-off');
      expect(waiting).toMatchObject({ state: 'pending', possible_duplicate: false, attempts: 0 });
      expect(waiting?.last_error).toMatch(
        /^the API key is missing, invalid or inactive \(POST \/events answered 403\)/,
      );
    } finally {
      await fx.sandbox.control.activateKey(fx.sandbox.apiKey);
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await sender(fx.sandbox.url).drain()).toMatchObject({ sent: 1, failed: 0 });
    expect(await received('key-off')).toBe(1);
  });
});

/**
 * A gateway that does not route POST /events (405): no event can cause one, so none is failed for
 * it; every event waits, its attempt not counted, and is sent once the route is served again.
 */
describe('outbox events answered 405', () => {
  const fx = outboxGatewayFixture({ seed: 54 });
  const { row, received } = fx;

  it('keeps every event pending, the attempt not counted, and sends each once the route is back', async () => {
    await enqueueEvents(fx.db.knex, fx.db, [newEvent('unrouted-1'), newEvent('unrouted-2')]);
    fx.gateway.notRouted = true;
    const sender = fx.sender(
      { scrubber: new SecretScrubber() },
      { url: fx.gatewayUrl },
      { worker: 'unrouted', concurrency: 2 },
    );
    const held = await sender.drain();
    expect(held).toMatchObject({ sent: 0, failed: 0, parked: 0, possibleDuplicates: 0 });
    expect(held.retried).toBeGreaterThanOrEqual(2);
    for (const key of ['unrouted-1', 'unrouted-2']) {
      const waiting = await row(key);
      expect(waiting).toMatchObject({ state: 'pending', possible_duplicate: false, attempts: 0 });
      expect(waiting?.last_error).toBe(
        'POST /events answered 405: (no error text) (the route is not served at REVIEWS_API_URL: nothing was processed; kept until it is, by REVIEWS_API_URL or the gateway in front)',
      );
    }

    fx.gateway.notRouted = false;
    // Due again after the policy's maxDelayMs (short in these senders).
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await sender.drain()).toMatchObject({ sent: 2, failed: 0, possibleDuplicates: 0 });
    for (const key of ['unrouted-1', 'unrouted-2']) {
      expect(await row(key)).toMatchObject({ state: 'sent', possible_duplicate: false, attempts: 1 });
      expect(await received(key)).toBe(1);
    }
  });
});
