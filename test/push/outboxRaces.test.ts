import { setTimeout as sleep } from 'node:timers/promises';
import type { Knex } from 'knex';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type Migration, migrations } from '../../migrations/index.js';
import { type Db, openDb } from '../../src/db/connect.js';
import { migrate } from '../../src/db/migrate.js';
import { claimDueEvents, enqueueEvents, pruneOutbox, resolveEvent } from '../../src/push/events/outboxSql.js';
import { dropSchema, freshDb, POSTGRES_URL, uniqueSchema } from '../helpers/db.js';
import { newEvent } from './helpers.js';

const event = (key: string) => newEvent(key, { email: 'ana@example.com', metadata: null });

/**
 * The outbox's statements racing each other in separate sessions of the real PostgreSQL server:
 * a second session holds a row lock so that one statement is deterministically in flight while
 * the other runs.
 */
describe('outbox statements racing each other', () => {
  let db: Db;
  let holder: pg.Client;
  let partner: pg.Client;
  beforeAll(async () => {
    db = await freshDb({ url: POSTGRES_URL });
  });
  afterEach(async () => {
    await holder?.end();
    await partner?.end();
  });
  afterAll(async () => {
    await db?.close();
  });
  const connect = async () => {
    const client = new pg.Client(POSTGRES_URL);
    await client.connect();
    return client;
  };
  const outbox = () => db.knex(db.table('events_outbox'));

  it('a key re-enqueued while the prune removes its sent row is still refused (SQL function and batch)', async () => {
    await outbox().del();
    await enqueueEvents(db.knex, db, ['race-1', 'race-2', 'race-3'].map(event));
    await outbox().update({ state: 'sent', sent_at: db.knex.raw("now() - interval '8 days'") });
    holder = await connect();
    partner = await connect();
    // The prune deletes race-1 and race-2, then waits on race-3, locked by another session.
    await holder.query('begin');
    await holder.query(
      `select 1 from ${db.table('events_outbox')} where idempotency_key = 'race-3' for update`,
    );
    const pruning = pruneOutbox(db.knex, db, 7, 400);
    await sleep(300);
    const viaFunction = partner.query(`select ${db.schema}.enqueue_event($1, $2, $3) as enqueued`, [
      'ana@example.com',
      'matter.closed',
      'race-1',
    ]);
    const viaBatch = enqueueEvents(db.knex, db, [event('race-2')]);
    await sleep(300);
    await holder.query('commit');
    const [pruned, fn, batch] = await Promise.all([pruning, viaFunction, viaBatch]);
    expect(pruned.pruned).toBe(3);
    expect(fn.rows[0].enqueued).toBe(false);
    expect(batch).toBe(0);
    expect(await outbox().count({ n: '*' })).toEqual([{ n: '0' }]);
    const keys = await db.knex(db.table('event_keys')).orderBy('idempotency_key').pluck('idempotency_key');
    expect(keys).toEqual(['race-1', 'race-2', 'race-3']);
  });

  it('`events discard` on an event a replica claims meanwhile changes nothing and says it is being sent', async () => {
    await outbox().del();
    await enqueueEvents(db.knex, db, [event('claimed-1')]);
    holder = await connect();
    // A replica's claim, committed 300 ms after the operator's discard started.
    await holder.query('begin');
    await holder.query(
      `update ${db.table('events_outbox')} set state = 'sending', claimed_by = 'replica-b', attempts = attempts + 1,
              lease_expires_at = now() + interval '60 seconds'
        where idempotency_key = 'claimed-1'`,
    );
    const discarding = resolveEvent(db.knex, db, 'claimed-1', 'discard');
    await sleep(300);
    await holder.query('commit');
    expect(await discarding).toBe('sending');
    expect(await outbox().where({ idempotency_key: 'claimed-1' }).first('state', 'last_error')).toEqual({
      state: 'sending',
      last_error: null,
    });
    // Once it is parked, the same command discards it; a failed event stays failed.
    await outbox().where({ idempotency_key: 'claimed-1' }).update({ state: 'parked', claimed_by: null });
    expect(await resolveEvent(db.knex, db, 'claimed-1', 'discard')).toBe('failed');
    expect(await resolveEvent(db.knex, db, 'claimed-1', 'discard')).toBe('failed');
    expect(await resolveEvent(db.knex, db, 'claimed-1', 'retry')).toBe('pending');
    expect(await resolveEvent(db.knex, db, 'no-such-key', 'retry')).toBeUndefined();
    expect(await claimDueEvents(db.knex, db, 'w', 5, 60_000)).toHaveLength(1);
  });
});

/** Migration 014 on an outbox that 011 filled: every key already there becomes a known key. */
describe('migration 014 on an existing outbox', () => {
  const schema = uniqueSchema('m014');
  let db: Db;
  beforeAll(async () => {
    db = await openDb({ url: POSTGRES_URL, schema, poolMax: 2, dataDir: undefined });
  });
  afterAll(async () => {
    await db?.close();
    await dropSchema(schema, POSTGRES_URL);
  });

  it('copies the keys of the rows in the outbox into event_keys, so none is enqueued again', async () => {
    // The schema as a release before 014 left it, migrated the way `migrate` does.
    const before = migrations.slice(
      0,
      migrations.findIndex((m) => m.name === '013_directory_quarantine') + 1,
    );
    await db.knex.raw('create schema ??', [schema]);
    await db.knex.migrate.latest({
      migrationSource: {
        getMigrations: async () => before,
        getMigrationName: (m: Migration) => m.name,
        getMigration: async (m: Migration) => ({
          up: (knex: Knex) => m.up(knex, schema),
          down: async () => {},
        }),
      },
      schemaName: schema,
      tableName: 'knex_migrations',
    });
    const fn = `${schema}.enqueue_event`;
    await db.knex.raw('select ??(?, ?, ?)', [fn, 'ana@example.com', 'matter.closed', 'old-pending']);
    await db.knex.raw('select ??(?, ?, ?)', [fn, 'ana@example.com', 'matter.closed', 'old-sent']);
    await db
      .knex(db.table('events_outbox'))
      .where({ idempotency_key: 'old-sent' })
      .update({ state: 'sent', sent_at: db.knex.raw("now() - interval '8 days'") });
    await db.knex(db.table('event_keys')).insert({ idempotency_key: 'old-pruned', sent_at: new Date() });

    // 014 and what came after it (015's bounds keep 014's gate, which this checks through them).
    expect(await migrate(db)).toEqual(migrations.slice(before.length).map((m) => m.name));
    expect(
      await db.knex(db.table('events_outbox')).orderBy('idempotency_key').pluck('lapsed_claims'),
    ).toEqual([0, 0]);
    const keys = await db.knex(db.table('event_keys')).orderBy('idempotency_key').pluck('idempotency_key');
    expect(keys).toEqual(['old-pending', 'old-pruned', 'old-sent']);
    for (const key of [...keys, 'old-pending']) {
      const { rows } = await db.knex.raw('select ??(?, ?, ?) as enqueued', [
        fn,
        'ana@example.com',
        'matter.closed',
        key,
      ]);
      expect(rows[0].enqueued).toBe(false);
    }
    const { rows } = await db.knex.raw('select ??(?, ?, ?) as enqueued', [
      fn,
      'ana@example.com',
      'matter.closed',
      'new',
    ]);
    expect(rows[0].enqueued).toBe(true);
    expect(await pruneOutbox(db.knex, db, 7, 400)).toEqual({ pruned: 1, keysForgotten: 0 });
    const sent = await db.knex(db.table('event_keys')).where({ idempotency_key: 'old-sent' }).first();
    expect(sent.sent_at).not.toBeNull();
  });
});
