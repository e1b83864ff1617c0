import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/connect.js';
import { SecretScrubber } from '../../src/log.js';
import type { PartnerApi } from '../../src/partner-api/client.js';
import { enqueueEvents, resolveEvent } from '../../src/push/events/outboxSql.js';
import { freshDb } from '../helpers/db.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { newEvent, quickOutboxSender } from './helpers.js';
import { startOutboxGateway } from './outboxGateway.js';

/**
 * Under EVENTS_UNKNOWN_OUTCOME=park an event is parked unflagged at its unknown outcome: the
 * platform may have it. An operator who discards it makes it `failed`, like an event the platform
 * refused; retried later, it must still be sent as what it is, a possible second copy.
 */
describe('an event parked after an unknown outcome, discarded, then retried (park)', () => {
  let sandbox: TestSandbox;
  let db: Db;
  let gateway: Awaited<ReturnType<typeof startOutboxGateway>>;
  const apis: PartnerApi[] = [];
  beforeAll(async () => {
    sandbox = await testSandbox({ seed: 67 });
    gateway = await startOutboxGateway(sandbox.url);
    db = await freshDb();
  });
  afterAll(async () => {
    for (const api of apis) await api.close();
    await gateway?.close();
    await db?.close();
    await sandbox?.close();
  });

  const drain = () => {
    const { sender, api } = quickOutboxSender(
      { db, scrubber: new SecretScrubber() },
      { url: gateway.url, apiKey: sandbox.apiKey },
      { worker: 'discard-park', concurrency: 1, unknownOutcome: 'park' },
    );
    apis.push(api);
    return sender.drain();
  };
  const row = (key: string) =>
    db
      .knex(db.table('events_outbox'))
      .where({ idempotency_key: key })
      .first('state', 'possible_duplicate', 'last_error');
  const received = async (key: string) =>
    (await sandbox.control.truth(sandbox.companyId)).events.filter((e) => e.metadata?.key === key).length;

  it('is sent again flagged a possible duplicate: the discard kept what the parking knew', async () => {
    await enqueueEvents(db.knex, db, [newEvent('parked-discarded')]);
    // A 502 from a gateway once the platform has taken it: an unknown outcome.
    gateway.gateway.badGateways = 1;
    expect(await drain()).toMatchObject({ sent: 0, parked: 1 });
    const parked = await row('parked-discarded');
    expect(await resolveEvent(db.knex, db, 'parked-discarded', 'discard')).toBe('failed');
    const discarded = await row('parked-discarded');
    expect(await resolveEvent(db.knex, db, 'parked-discarded', 'retry')).toBe('pending');
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
    await enqueueEvents(db.knex, db, [newEvent('pending-discarded')]);
    expect(await resolveEvent(db.knex, db, 'pending-discarded', 'discard')).toBe('failed');
    expect(await row('pending-discarded')).toEqual({
      state: 'failed',
      possible_duplicate: false,
      last_error: 'discarded by an operator',
    });
    expect(await resolveEvent(db.knex, db, 'pending-discarded', 'retry')).toBe('pending');
    expect(await drain()).toMatchObject({ sent: 1, possibleDuplicates: 0 });
    expect(await received('pending-discarded')).toBe(1);
    expect(await row('pending-discarded')).toMatchObject({ state: 'sent', possible_duplicate: false });
  });
});
