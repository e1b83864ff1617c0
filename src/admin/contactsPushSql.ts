import type { Queryable, Tables } from '../db/queryable.js';
import { JOB } from '../jobs/jobNames.js';

/** The jobs that push CRM exports: the inbox of `run`, and `contacts push` from the command line. */
const PUSH_JOBS = [JOB.contactsInbox, JOB.contactsPush] as const;

/**
 * When the last CRM export was pushed with no contact failing in that push (those given up earlier
 * and held unchanged are not sent, and not failed), whichever process pushed it: the end of the newest successful run of a contacts job that pushed an export (its
 * counts have `read`, which an inbox poll that found nothing, or found only an events file, lacks)
 * and failed no contact. Undefined when none did. The two jobs share one lease, so their runs never
 * overlap: the newest by start is the newest by end. Each job is one backward step on
 * (job, started_at), as far back as its last such run.
 */
export async function readLastCompleteContactsPush(q: Queryable, db: Tables): Promise<Date | undefined> {
  const res = await q.raw(
    `select r.finished_at
       from (values ${PUSH_JOBS.map(() => '(?::text)').join(', ')}) as j (job)
       cross join lateral (
         select started_at, finished_at from ?? s
          where s.job = j.job and s.outcome = 'success' and s.finished_at is not null
            and s.counts -> 'read' is not null
            and coalesce((s.counts ->> 'failed')::numeric, 0) = 0
          order by s.started_at desc limit 1) r
      order by r.started_at desc limit 1`,
    [...PUSH_JOBS, db.table('sync_runs')],
  );
  const [row] = res.rows as Array<{ finished_at: Date | string }>;
  return row === undefined ? undefined : new Date(row.finished_at);
}
