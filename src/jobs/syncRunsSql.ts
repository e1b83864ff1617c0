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

/**
 * How a run ended: a success, a failure (with its kind and scrubbed text), or stopped by this
 * process's shutdown (a deploy), which says nothing about the job: no kind, and the text of what
 * it stopped (a back-off cut short names the answer it waited out).
 */
export type RunEnd = { counts: RunCounts } & (
  | { ok: true }
  | { ok: false; kind: ErrorKind; error: string }
  | { ok: 'interrupted'; error: string }
);

/**
 * Records how run `id` ended, unless another replica that took the job over has marked it
 * interrupted meanwhile (startRun): its verdict stands, so a run that lost its lease never shows
 * as the job's last success. False then.
 */
export async function finishRun(q: Queryable, db: Tables, id: number, end: RunEnd): Promise<boolean> {
  const updated = await q(db.table('sync_runs'))
    .where({ id, outcome: 'running' })
    .update({
      outcome: end.ok === true ? 'success' : end.ok === false ? 'failed' : 'interrupted',
      counts: JSON.stringify(end.counts),
      error: end.ok === true ? null : end.error,
      error_kind: end.ok === false ? end.kind : null,
      finished_at: q.fn.now(),
    });
  return updated > 0;
}

/** Most runs one prune deletes: a first prune of years of runs is spread over the job's next runs. */
const PRUNE_BATCH = 10_000;

/**
 * Deletes runs of `job` that started more than `retentionDays` ago, but its last successful run,
 * which the freshness gauges and the freshness view read however old it is. Called by the job's
 * own runs, under its lease: the index on (job, started_at) finds what expired since the last one.
 * Returns how many went.
 */
export async function pruneRuns(
  q: Queryable,
  db: Tables,
  job: string,
  retentionDays: number,
): Promise<number> {
  // `= any(array(…))`: by the primary key (`in (select …)` read the whole table to hash-join it,
  // 0.8 s at 1.5 million rows against 0.09). A count from the statement itself: the embedded
  // driver does not report affected rows.
  const { rows } = (await q.raw(
    `with expired as (
       select id from ?? r
        where r.job = ? and r.started_at < now() - make_interval(days => ?) and r.outcome <> 'running'
          and r.id is distinct from (
            select s.id from ?? s where s.job = ? and s.outcome = 'success'
             order by s.started_at desc limit 1)
        order by r.started_at
        limit ?),
     gone as (delete from ?? where id = any(array(select id from expired)) returning 1)
     select count(*)::int as n from gone`,
    [
      db.table('sync_runs'),
      job,
      retentionDays,
      db.table('sync_runs'),
      job,
      PRUNE_BATCH,
      db.table('sync_runs'),
    ],
  )) as { rows: Array<{ n: number }> };
  return Number(rows[0]?.n ?? 0);
}
