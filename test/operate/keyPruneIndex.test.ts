import { describe, expect, it } from 'vitest';
import { freshDb } from '../helpers/db.js';

/**
 * The outbox prune forgets keys past EVENTS_KEY_RETENTION_DAYS by `sent_at` (pruneOutbox): with
 * no index there, each hourly prune read the whole of event_keys (a key per event of 400 days by
 * default) at least once. What the planner can use once it costs an index over a scan (it picks
 * the scan on this test's empty table either way, so that is forbidden here).
 */
describe('the index of the key prune', () => {
  it('lets the prune find expired keys by sent_at without reading every key', async () => {
    const db = await freshDb();
    try {
      const plan = await db.knex.transaction(async (trx) => {
        await trx.raw('set local enable_seqscan = off');
        const { rows } = (await trx.raw(
          `explain select idempotency_key from ?? where sent_at < now() - make_interval(days => ?) limit ?`,
          [db.table('event_keys'), 400, 10_000],
        )) as { rows: Array<{ 'QUERY PLAN': string }> };
        return rows.map((r) => r['QUERY PLAN']).join('\n');
      });
      expect(plan).toMatch(/event_keys_sent_at_idx/);
      const { rows } = (await db.knex.raw(`select obj_description(?::regclass, 'pg_class') as comment`, [
        `${db.table('event_keys_sent_at_idx')}`,
      ])) as { rows: Array<{ comment: string | null }> };
      expect(rows[0]?.comment).toMatch(/prune/);
    } finally {
      await db.close();
    }
  });
});
