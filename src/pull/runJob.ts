import type { Db } from '../db/connect.js';
import { describeError } from '../errors.js';
import type { Logger } from '../log.js';
import type { RunCounts } from './context.js';
import { finishRun, startRun } from './syncRunsSql.js';

export type JobBody = (counts: RunCounts, signal?: AbortSignal) => Promise<void>;

export type JobRun =
  | { job: string; outcome: 'success'; counts: RunCounts }
  | { job: string; outcome: 'skipped'; counts: RunCounts };

export const jobLockKey = (db: Db, job: string) => `review-mirror:job:${job}:${db.schema}`;

/**
 * Runs one job under its cluster-wide lock and records the run in `sync_runs` (outcome, counts,
 * the error's one-line description). `wait: false` (the daemon) skips the run when another
 * replica holds the lock; `wait: true` (the CLI) waits for it. A failure is recorded, then rethrown.
 */
export async function runJob(
  db: Db,
  log: Logger,
  job: string,
  body: JobBody,
  options: { wait: boolean; signal?: AbortSignal },
): Promise<JobRun> {
  const counts: RunCounts = {};
  const run = async (): Promise<JobRun> => {
    const id = await startRun(db, job);
    const startedAt = Date.now();
    log.info({ job }, 'sync job started');
    try {
      await body(counts, options.signal);
    } catch (error) {
      await finishRun(db, id, 'failed', counts, describeError(error)).catch((e: unknown) =>
        log.error({ job, err: e }, 'could not record the failed run'),
      );
      throw error;
    }
    await finishRun(db, id, 'success', counts);
    log.info({ job, counts, ms: Date.now() - startedAt }, 'sync job finished');
    return { job, outcome: 'success', counts };
  };
  const key = jobLockKey(db, job);
  if (options.wait) {
    const attempt = await db.tryWithLock(key, run);
    if (attempt.acquired) return attempt.value;
    log.info({ job }, 'job is running in another process; waiting for it');
    return db.withLock(key, run);
  }
  const attempt = await db.tryWithLock(key, run);
  if (attempt.acquired) return attempt.value;
  log.info({ job }, 'job is running in another replica; skipped');
  return { job, outcome: 'skipped', counts };
}
