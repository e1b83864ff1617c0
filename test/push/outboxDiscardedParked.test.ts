import { describe, expect, it } from 'vitest';
import { SecretScrubber } from '../../src/log.js';
import { enqueueEvents, resolveEvent } from '../../src/push/events/outboxSql.js';
import { newEvent } from './helpers.js';
import { outboxGatewayFixture } from './outboxGateway.js';

/**
 * Under EVENTS_UNKNOWN_OUTCOME=park an event is parked unflagged at its unknown outcome: the
 * platform may have it. An operator who discards it makes it `failed`, like an event the platform
 * refused; retried later, it must still be sent as what it is, a possible second copy.
 */
describe('an event parked after an unknown outcome, discarded, then retried (park)', () => {
  const fx = outboxGatewayFixture({ seed: 67 });
  const { received } = fx;
  // Without `attempts`: the discarded row is compared whole.
  const row = (key: string) => fx.row(key, ['state', 'possible_duplicate', 'last_error']);

  const drain = () =>
    fx
      .sender(
        { scrubber: new SecretScrubber() },
        { url: fx.gatewayUrl },
        { worker: 'discard-park', concurrency: 1, unknownOutcome: 'park' },
      )
      .drain();

  it('is sent again flagged a possible duplicate: the discard kept what the parking knew', async () => {
    await enqueueEvents(fx.db.knex, fx.db, [newEvent('parked-discarded')]);
    // A 502 from a gateway once the platform has taken it: an unknown outcome.
    fx.gateway.badGateways = 1;
    expect(await drain()).toMatchObject({ sent: 0, parked: 1 });
    const parked = await row('parked-discarded');
    expect(await resolveEvent(fx.db.knex, fx.db, 'parked-discarded', 'discard')).toBe('failed');
    const discarded = await row('parked-discarded');
    expect(await resolveEvent(fx.db.knex, fx.db, 'parked-discarded', 'retry')).toBe('pending');
    const retried = await row('parked-discarded');
    expect(await drain()).toMatchObject({ sent: 1 });

    // The platform has it twice, and the row says it may.
    expect(await received('parked-discarded')).toBe(2);
    expect(await row('parked-discarded')).toMatchObject({ state: 'sent', possible_duplicate: true });
    expect(parked).toMatchObject({ state: 'parked', possible_duplicate: false });
    expect(discarded).toMatchObject({ state: 'failed', possible_duplicate: true });
    expect(discarded?.last_error).toMatch(
      /^discarded by an operator; it was parked: outcome unknown, parked for an operator: POST \/events answered 502/,
    );
    expect(retried).toMatchObject({ state: 'pending', possible_duplicate: true, last_error: null });
  });

  it('a pending event the platform never saw, discarded then retried, is sent unflagged', async () => {
    await enqueueEvents(fx.db.knex, fx.db, [newEvent('pending-discarded')]);
    expect(await resolveEvent(fx.db.knex, fx.db, 'pending-discarded', 'discard')).toBe('failed');
    expect(await row('pending-discarded')).toEqual({
      state: 'failed',
      possible_duplicate: false,
      last_error: 'discarded by an operator',
    });
    expect(await resolveEvent(fx.db.knex, fx.db, 'pending-discarded', 'retry')).toBe('pending');
    expect(await drain()).toMatchObject({ sent: 1, possibleDuplicates: 0 });
    expect(await received('pending-discarded')).toBe(1);
    expect(await row('pending-discarded')).toMatchObject({ state: 'sent', possible_duplicate: false });
  });
});
