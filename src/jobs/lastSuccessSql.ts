import type { Queryable, Tables } from '../db/queryable.js';
import type { RunCounts } from './runCounts.js';

/** A job's last successful run: when it finished and what it recorded. */
export interface LastSuccess {
  readonly finishedAt: Date;
  readonly counts: RunCounts;
}

/**
 * The last successful run (`sync_runs`) of each of `jobs` that also meets `condition` (SQL on the
 * run `s`), whichever process ran it; a job with none is left out. A job's runs never overlap (its
 * lease), so its latest success by start is its latest by end: each job costs one backward step on
 * (job, started_at) however long the log, cheap enough to ask on every metrics refresh.
 */
async function lastSuccessRows(
  q: Queryable,
  db: Tables,
  jobs: readonly string[],
  condition = 'true',
): Promise<
  Array<{ job: string; started_at: Date | string; finished_at: Date | string; counts: RunCounts | null }>
> {
  if (jobs.length === 0) return [];
  const res = await q.raw(
    `select j.job, r.started_at, r.finished_at, r.counts
       from (values ${jobs.map(() => '(?::text)').join(', ')}) as j (job)
       cross join lateral (
         select started_at, finished_at, counts from ?? s
          where s.job = j.job and s.outcome = 'success' and s.finished_at is not null and (${condition})
          order by s.started_at desc limit 1) r`,
    [...jobs, db.table('sync_runs')],
  );
  return res.rows;
}

/** The last successful run of each of `jobs` (see lastSuccessRows). */
export async function readLastSuccesses(
  q: Queryable,
  db: Tables,
  jobs: readonly string[],
): Promise<Map<string, LastSuccess>> {
  const rows = await lastSuccessRows(q, db, jobs);
  return new Map(rows.map((r) => [r.job, { finishedAt: new Date(r.finished_at), counts: r.counts ?? {} }]));
}

/**
 * When the last CRM export was pushed with no contact failing in that push (those given up earlier
 * and held unchanged are not sent, and not failed), by any of `jobs` (the inbox of `run`, and
 * `contacts push`): the end of the newest successful run that pushed an export (its counts have
 * `read`, which an inbox poll that found nothing, or only an events file, lacks) and failed no
 * contact. Undefined when none did. The jobs share one lease, so their runs never overlap: the
 * newest by start is the newest by end.
 */
export async function readLastCompletePush(
  q: Queryable,
  db: Tables,
  jobs: readonly string[],
): Promise<Date | undefined> {
  const rows = await lastSuccessRows(
    q,
    db,
    jobs,
    "s.counts -> 'read' is not null and coalesce((s.counts ->> 'failed')::numeric, 0) = 0",
  );
  const newest = rows.reduce<(typeof rows)[number] | undefined>(
    (a, r) => (a === undefined || new Date(r.started_at) > new Date(a.started_at) ? r : a),
    undefined,
  );
  return newest === undefined ? undefined : new Date(newest.finished_at);
}
