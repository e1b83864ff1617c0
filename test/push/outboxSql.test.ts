import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/connect.js';
import {
  claimDueEvents,
  enqueueEvents,
  pruneOutbox,
  readOutboxBacklog,
  readOutboxStats,
  recordDecisions,
  releaseExpiredClaims,
  renewClaims,
} from '../../src/push/events/outboxSql.js';
import { freshDb } from '../helpers/db.js';
import { newEvent } from './helpers.js';

/** The outbox's SQL on a real database (the server in CI, embedded otherwise). */
describe('outbox SQL', () => {
  let db: Db;
  beforeAll(async () => {
    db = await freshDb();
  });
  afterAll(async () => {
    await db?.close();
  });
  const outbox = () => db.knex(db.table('events_outbox'));

  it('claims disjoint rows for two workers, each claim leased and counted as an attempt', async () => {
    expect(
      await enqueueEvents(
        db.knex,
        db,
        ['c1', 'c2', 'c3'].map((k) => newEvent(k)),
      ),
    ).toBe(3);
    expect(await enqueueEvents(db.knex, db, [newEvent('c1')])).toBe(0);
    const a = await claimDueEvents(db.knex, db, 'worker-a', 2, 60_000);
    const b = await claimDueEvents(db.knex, db, 'worker-b', 2, 60_000);
    expect(a.map((e) => e.key)).toEqual(['c1', 'c2']);
    expect(b.map((e) => e.key)).toEqual(['c3']);
    expect(a[0]!.attempts).toBe(1);
    expect(await claimDueEvents(db.knex, db, 'worker-c', 5, 60_000)).toEqual([]);
    // An outcome is written only by the worker holding the claim.
    expect(
      await recordDecisions(db.knex, db, 'worker-b', [
        {
          id: a[0]!.id,
          state: 'sent',
          delayMs: 0,
          error: null,
          possibleDuplicate: false,
          refund: false,
          platformId: 'x',
          platformStatus: 'queued',
        },
      ]),
    ).toEqual(new Set());
    const written = await recordDecisions(db.knex, db, 'worker-a', [
      {
        id: a[0]!.id,
        state: 'sent',
        delayMs: 0,
        error: null,
        possibleDuplicate: false,
        refund: false,
        platformId: 'p1',
        platformStatus: 'queued',
      },
      {
        id: a[1]!.id,
        state: 'pending',
        delayMs: 60_000,
        error: '500',
        possibleDuplicate: false,
        refund: false,
        platformId: null,
        platformStatus: null,
      },
    ]);
    expect(written).toEqual(new Set([a[0]!.id, a[1]!.id]));
    expect(await outbox().where({ idempotency_key: 'c1' }).first()).toMatchObject({
      state: 'sent',
      platform_event_id: 'p1',
    });
    const c2 = await outbox().where({ idempotency_key: 'c2' }).first();
    expect(c2).toMatchObject({ state: 'pending', last_error: '500', claimed_by: null });
    expect(new Date(c2.next_attempt_at).getTime()).toBeGreaterThan(Date.now() + 30_000);
  });

  it('renews only the claims the worker still holds', async () => {
    const before = await outbox().where({ idempotency_key: 'c3' }).first('lease_expires_at');
    const c3 = Number((await outbox().where({ idempotency_key: 'c3' }).first('id')).id);
    const c1 = Number((await outbox().where({ idempotency_key: 'c1' }).first('id')).id);
    expect(await renewClaims(db.knex, db, 'worker-a', [c3], 120_000)).toEqual(new Set());
    expect(await renewClaims(db.knex, db, 'worker-b', [c3, c1], 120_000)).toEqual(new Set([c3]));
    const after = await outbox().where({ idempotency_key: 'c3' }).first('lease_expires_at');
    expect(new Date(after.lease_expires_at).getTime()).toBeGreaterThan(
      new Date(before.lease_expires_at).getTime(),
    );
  });

  it('takes back the claims of a dead worker as unknown outcomes: sent again and flagged, or parked', async () => {
    await outbox()
      .where({ idempotency_key: 'c3' })
      .update({ lease_expires_at: db.knex.raw("now() - interval '1 second'") });
    expect(await releaseExpiredClaims(db.knex, db, 'retry')).toBe(1);
    expect(await outbox().where({ idempotency_key: 'c3' }).first()).toMatchObject({
      state: 'pending',
      possible_duplicate: true,
    });
    await enqueueEvents(db.knex, db, [newEvent('p1')]);
    await claimDueEvents(db.knex, db, 'worker-d', 10, 60_000);
    await outbox()
      .where({ idempotency_key: 'p1' })
      .update({ lease_expires_at: db.knex.raw("now() - interval '1 second'") });
    expect(await releaseExpiredClaims(db.knex, db, 'park')).toBe(1);
    expect(await outbox().where({ idempotency_key: 'p1' }).first()).toMatchObject({ state: 'parked' });
  });

  it('prunes sent rows after the retention, still refusing their keys until the key retention ends', async () => {
    await outbox()
      .where({ idempotency_key: 'c1' })
      .update({ sent_at: db.knex.raw("now() - interval '8 days'") });
    expect(await pruneOutbox(db.knex, db, 7, 400)).toEqual({ pruned: 1, keysForgotten: 0 });
    expect(await outbox().where({ idempotency_key: 'c1' }).first()).toBeUndefined();
    expect(await enqueueEvents(db.knex, db, [newEvent('c1')])).toBe(0);
    const viaSql = await db.knex.raw('select ??(?, ?, ?) as enqueued', [
      `${db.schema}.enqueue_event`,
      'c1@example.com',
      'matter.closed',
      'c1',
    ]);
    expect(viaSql.rows[0].enqueued).toBe(false);
    await db
      .knex(db.table('event_keys'))
      .where({ idempotency_key: 'c1' })
      .update({ sent_at: db.knex.raw("now() - interval '401 days'") });
    expect(await pruneOutbox(db.knex, db, 7, 400)).toEqual({ pruned: 0, keysForgotten: 1 });
    expect(await enqueueEvents(db.knex, db, [newEvent('c1')])).toBe(1);
  });

  it('reads the backlog gauges from the rows still to send alone, agreeing with the full statistics', async () => {
    await outbox().del();
    await enqueueEvents(
      db.knex,
      db,
      ['g1', 'g2', 'g3', 'g4'].map((k) => newEvent(k)),
    );
    await outbox().where({ idempotency_key: 'g1' }).update({ state: 'sent', sent_at: db.knex.fn.now() });
    await outbox().where({ idempotency_key: 'g2' }).update({ state: 'sending', claimed_by: 'w' });
    await outbox()
      .where({ idempotency_key: 'g3' })
      .update({ enqueued_at: db.knex.raw("now() - interval '90 seconds'") });
    const backlog = await readOutboxBacklog(db.knex, db);
    const stats = await readOutboxStats(db.knex, db);
    expect(backlog.backlog).toBe(3);
    expect(backlog.backlog).toBe(stats.backlog);
    expect(backlog.oldestPendingSeconds).toBeGreaterThanOrEqual(90);
    expect(backlog.oldestPendingSeconds).toBeCloseTo(stats.oldestPendingSeconds, 0);
    await outbox().del();
    expect(await readOutboxBacklog(db.knex, db)).toEqual({ backlog: 0, oldestPendingSeconds: 0 });
  });
});
