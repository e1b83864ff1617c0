import type { Queryable, Tables } from '../db/queryable.js';
import type { RunCounts } from './runCounts.js';

/** How a run that did not succeed failed: worth retrying at the next tick, or not until someone acts. */
export type ErrorKind = 'retryable' | 'fatal';

/**
 * Starts a `sync_runs` row for `replica`. Runs of `job` still marked running died with their
 * process or lost the lease: the caller holds the job's lease now.
 */
export async function startRun(q: Queryable, db: Tables, job: string, replica: string): Promise<number> {
  await q(db.table('sync_runs'))
    .where({ job, outcome: 'running' })
    .update({ outcome: 'interrupted', finished_at: q.fn.now() });
  const [row] = await q(db.table('sync_runs')).insert({ job, replica }).returning('id');
  return Number(row.id);
}

export async function finishRun(
  q: Queryable,
  db: Tables,
  id: number,
  outcome: { counts: RunCounts } & ({ ok: true } | { ok: false; kind: ErrorKind; error: string }),
): Promise<void> {
  await q(db.table('sync_runs'))
    .where({ id })
    .update({
      outcome: outcome.ok ? 'success' : 'failed',
      counts: JSON.stringify(outcome.counts),
      error: outcome.ok ? null : outcome.error,
      error_kind: outcome.ok ? null : outcome.kind,
      finished_at: q.fn.now(),
    });
}
