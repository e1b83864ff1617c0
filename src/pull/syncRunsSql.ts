import type { Db } from '../db/connect.js';
import type { RunCounts } from './context.js';

/** Starts a `sync_runs` row. Runs of `job` still marked running died with their process: the caller holds the job's lock. */
export async function startRun(db: Db, job: string): Promise<number> {
  await db
    .knex(db.table('sync_runs'))
    .where({ job, outcome: 'running' })
    .update({ outcome: 'interrupted', finished_at: db.knex.fn.now() });
  const [row] = await db.knex(db.table('sync_runs')).insert({ job }).returning('id');
  return Number(row.id);
}

export async function finishRun(
  db: Db,
  id: number,
  outcome: 'success' | 'failed',
  counts: RunCounts,
  error?: string,
): Promise<void> {
  await db
    .knex(db.table('sync_runs'))
    .where({ id })
    .update({ outcome, counts: JSON.stringify(counts), error: error ?? null, finished_at: db.knex.fn.now() });
}
