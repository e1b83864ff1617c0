import type { Queryable } from './queryable.js';

/**
 * The database's clock, so every comparison with `now()`-stamped columns uses one clock. It reads
 * no table, so it takes no `Tables`.
 */
export async function readDatabaseNow(q: Queryable): Promise<Date> {
  const result = await q.raw('select now() as now');
  return new Date(result.rows[0].now);
}
