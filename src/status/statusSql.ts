import type { Queryable, Tables } from '../db/queryable.js';
import { API_KEY_REFUSED, BROKEN_PAGINATION, INVALID_BODY } from '../partner-api/errors.js';

/**
 * The reads behind `status` that span tables owned elsewhere (`sync_state` with `sync_runs`), and
 * whether tables exist at all: `status` must answer on a database whose migrations are pending.
 */

export async function hasTables(q: Queryable, db: Tables, names: readonly string[]): Promise<boolean> {
  for (const name of names) if (!(await q.schema.withSchema(db.schema).hasTable(name))) return false;
  return true;
}

/** Per job: its checkpoint row and its latest run, either of which may be missing. */
export interface JobStatusRow {
  job: string;
  watermark: Date | string | null;
  walk_in_progress: boolean;
  started_at: Date | string | null;
  finished_at: Date | string | null;
  outcome: string | null;
  counts: Record<string, number> | null;
  error: string | null;
}

export async function readJobStatuses(q: Queryable, db: Tables): Promise<JobStatusRow[]> {
  return q
    .with('latest', (w) =>
      w
        .from(db.table('sync_runs'))
        .distinctOn('job')
        .select('job', 'started_at', 'finished_at', 'outcome', 'counts', 'error')
        .orderBy([
          { column: 'job' },
          { column: 'started_at', order: 'desc' },
          { column: 'id', order: 'desc' },
        ]),
    )
    .select(
      q.raw('coalesce(s.job, l.job) as job'),
      's.watermark',
      q.raw('s.cursor is not null as walk_in_progress'),
      'l.started_at',
      'l.finished_at',
      'l.outcome',
      'l.counts',
      'l.error',
    )
    .from({ s: db.table('sync_state') })
    .fullOuterJoin({ l: 'latest' }, 's.job', 'l.job')
    .orderBy('job');
}

/**
 * The platform answered 2xx with a page this client refused (a cursor missing, a record invalid),
 * so it took the key. A run keeps only its error's text (sync_runs.error), as for API_KEY_REFUSED.
 */
const servedButRefused = (error: string): boolean =>
  error.includes(` ${BROKEN_PAGINATION}: `) || error.includes(` ${INVALID_BODY}: `);

/**
 * Whether the platform accepted the API key at the last attempt: the latest finished run of a job
 * in `jobs` (those that call the API) succeeded, read pages before it failed, or failed on a page
 * the platform served (true); was refused the key (false); or failed otherwise (null: nothing is
 * known of the key, as the platform was not reached or answered with no word on it, a 5xx).
 * Undefined before any run.
 */
export async function readApiKeyState(
  q: Queryable,
  db: Tables,
  jobs: readonly string[],
): Promise<{ accepted: boolean | null; at: Date } | undefined> {
  const last = await q(db.table('sync_runs'))
    .whereIn('job', jobs)
    .whereIn('outcome', ['success', 'failed'])
    .orderBy('finished_at', 'desc')
    .first('outcome', 'error', 'counts', 'finished_at');
  if (last === undefined) return undefined;
  return { accepted: keyVerdict(last), at: last.finished_at };
}

/** The verdict on the key of one finished run (see readApiKeyState). */
function keyVerdict(run: {
  outcome: string;
  error: string | null;
  counts: Record<string, number> | null;
}): boolean | null {
  if (run.outcome === 'success') return true;
  const error = run.error ?? '';
  if (error.startsWith(API_KEY_REFUSED)) return false;
  if ((run.counts?.pages ?? 0) > 0 || servedButRefused(error)) return true;
  return null;
}

/** The outcome of the latest run of `job` that is no longer running; undefined before one ends. */
export async function readLastFinishedRun(
  q: Queryable,
  db: Tables,
  job: string,
): Promise<{ outcome: string } | undefined> {
  return q(db.table('sync_runs'))
    .where({ job })
    .whereNot({ outcome: 'running' })
    .orderBy('id', 'desc')
    .first('outcome');
}
