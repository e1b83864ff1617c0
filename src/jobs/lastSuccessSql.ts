import type { Queryable, Tables } from '../db/queryable.js';
import type { RunCounts } from './runCounts.js';

/** A job's last successful run: when it finished and what it recorded. */
export interface LastSuccess {
  readonly finishedAt: Date;
  readonly counts: RunCounts;
}

/**
 * The last successful run (`sync_runs`) of each of `jobs`, whichever process ran it; a job that
 * never succeeded is left out. A job's runs never overlap (its lease), so its latest success by
 * start is its latest by end: each job costs one backward step on (job, started_at) however long
 * the log, cheap enough to ask on every metrics refresh.
 */
export async function readLastSuccesses(
  q: Queryable,
  db: Tables,
  jobs: readonly string[],
): Promise<Map<string, LastSuccess>> {
  if (jobs.length === 0) return new Map();
  const res = await q.raw(
    `select j.job, r.finished_at, r.counts
       from (values ${jobs.map(() => '(?::text)').join(', ')}) as j (job)
       cross join lateral (
         select finished_at, counts from ?? s
          where s.job = j.job and s.outcome = 'success' and s.finished_at is not null
          order by s.started_at desc limit 1) r`,
    [...jobs, db.table('sync_runs')],
  );
  const rows = res.rows as Array<{ job: string; finished_at: Date | string; counts: RunCounts | null }>;
  return new Map(rows.map((r) => [r.job, { finishedAt: new Date(r.finished_at), counts: r.counts ?? {} }]));
}
