import type { Db } from '../db/connect.js';
import { describeError, FatalError } from '../errors.js';
import type { Logger, SecretScrubber } from '../log.js';
import type { Metrics } from '../metrics.js';
import type { JobName } from './jobNames.js';
import {
  CLI_LEASE_WAIT_MS,
  type Fence,
  JobLease,
  LeaseLostError,
  type LeaseSettings,
  NO_FENCE,
} from './lease.js';
import { REPLICA_ID } from './replicaIdentity.js';
import type { RunCounts } from './runCounts.js';
import { type ErrorKind, finishRun, pruneRuns, type RunEnd, startRun } from './syncRunsSql.js';

/**
 * What a run knows of itself: its `sync_runs.id` (undefined when not exclusive), for rows that
 * join it, and the fence its checkpoint writes call in their transaction.
 */
export interface JobRunInfo {
  readonly runId: number | undefined;
  readonly fence: Fence;
}

export type JobBody = (counts: RunCounts, signal?: AbortSignal, run?: JobRunInfo) => Promise<void>;

/** A job as the runner sees it: its one name, its body, whether it runs on one replica at a time. */
export interface RunnableJob {
  readonly name: JobName;
  readonly run: JobBody;
  /**
   * Exclusive jobs (the default) run under the job's lease and record every run in `sync_runs`.
   * A job that is not exclusive runs on every replica and records nothing but metrics.
   */
  readonly exclusive?: boolean;
  /**
   * The lease it runs under, when not its own: jobs that must never run at once share one (a
   * contacts push from the CLI holds the inbox's, so the two never send the same contacts).
   */
  readonly lease?: JobName;
}

export type JobRun =
  | { job: string; outcome: 'success'; counts: RunCounts }
  | { job: string; outcome: 'skipped'; counts: RunCounts };

/**
 * Outcomes of the `review_mirror_job_runs_total` counter. `interrupted`: stopped by this process's
 * shutdown (a deploy), which is no failure of the job; the alerts on failing runs leave it out.
 */
export const JOB_OUTCOMES = [
  'success',
  'skipped',
  'retryable_failure',
  'fatal_failure',
  'interrupted',
] as const;
export type JobOutcome = (typeof JOB_OUTCOMES)[number];

export interface RunnerDeps {
  readonly db: Db;
  readonly log: Logger;
  /** Absent for a one-shot CLI run, which has no registry. */
  readonly metrics?:
    | Pick<Metrics, 'jobRuns' | 'jobDuration' | 'jobRunning' | 'jobLastSuccess' | 'pruneFailures'>
    | undefined;
  /** Error texts come from outside (a platform's error body) and are stored: scrubbed first. */
  readonly scrubber?: SecretScrubber | undefined;
  /** Whose leases, and for how long; default this process for DEFAULT_LEASE_SECONDS. */
  readonly lease?: Partial<LeaseSettings> | undefined;
  /** How long a job's runs stay in `sync_runs`; default DEFAULT_RUN_RETENTION_DAYS. */
  readonly runRetentionDays?: number | undefined;
}

export const DEFAULT_LEASE_SECONDS = 30;
export const DEFAULT_RUN_RETENTION_DAYS = 90;

/**
 * Fatal errors (a bad API key, a contract the platform broke, bad configuration) will fail every
 * run until someone acts; anything else — the platform or the database unavailable, a connection
 * lost — may pass, and the next tick retries.
 */
export function errorKindOf(error: unknown): ErrorKind {
  return error instanceof FatalError ? 'fatal' : 'retryable';
}

/**
 * Whether a run ended because the caller stopped it (the daemon's or the CLI's shutdown: its
 * signal aborted, or a back-off cut short once shutdown began), which is no failure of the job:
 * two deploys during the daily reconcile must not page as a job that keeps failing. A run that
 * lost its lease stays a failure, even when shutdown came as well: its work was cut short by
 * another replica, which is what the alerts must see. So is a fatal error, which the next run
 * will meet again whatever stopped this one.
 */
function stoppedByShutdown(
  error: unknown,
  caller: ReadonlyArray<AbortSignal | undefined>,
  lease: JobLease | undefined,
): boolean {
  if (!caller.some((signal) => signal?.aborted === true)) return false;
  if (error instanceof LeaseLostError || lease?.signal.reason instanceof LeaseLostError) return false;
  return errorKindOf(error) !== 'fatal';
}

/** What runs stopped by shutdown rejected with (recorded and logged as interrupted by runJob). */
const interruptions = new WeakSet<object>();

/**
 * Whether a run rejected with `error` because shutdown stopped it: runJob recorded, counted and
 * logged it as interrupted, so its caller has nothing to report. Its verdict, not a second one.
 */
export function interruptedByShutdown(error: unknown): boolean {
  return typeof error === 'object' && error !== null && interruptions.has(error);
}

/** Counts a run that did not happen because the job is already running (here or on another replica). */
export function countSkipped(deps: RunnerDeps, job: string, where: 'process' | 'replica'): void {
  deps.metrics?.jobRuns.inc({ sync_job: job, outcome: 'skipped' satisfies JobOutcome });
  const message =
    where === 'process' ? 'job still running; tick skipped' : 'job is running in another replica; skipped';
  deps.log.info({ job }, message);
}

/**
 * Runs one job: under its lease when exclusive (`wait: false`, the daemon: skip when another
 * replica holds it; `wait: true`, the CLI: queue for it), recording the run in `sync_runs` with its
 * replica, counts and, on failure, the scrubbed one-line error and whether it is retryable or
 * fatal. The only place that moves the job metrics. A failure is recorded and counted, then
 * rethrown for the caller to report (the scheduler logs it; the CLI prints its one line).
 */
export async function runJob(
  deps: RunnerDeps,
  job: RunnableJob,
  options: {
    wait: boolean;
    signal?: AbortSignal;
    /**
     * Aborted once the caller's shutdown began, when `signal` may abort only later (the daemon
     * gives runs a grace period): a run that fails meanwhile was stopped by it.
     */
    shutdown?: AbortSignal;
  },
): Promise<JobRun> {
  const { db, log, metrics } = deps;
  const name = job.name;
  const counts: RunCounts = {};
  const settings: LeaseSettings = {
    holder: deps.lease?.holder ?? REPLICA_ID,
    seconds: deps.lease?.seconds ?? DEFAULT_LEASE_SECONDS,
  };
  // Taking the lease and starting the run record are the run's first statements: during a database
  // outage they are what fails, and a failure nobody counts never raises the alert on failing runs.
  const failedToStart = (error: unknown): never => {
    metrics?.jobRuns.inc({ sync_job: name, outcome: `${errorKindOf(error)}_failure` satisfies JobOutcome });
    throw error;
  };
  // Each run of a job prunes the job's expired runs after recording its own end: what expired
  // since its last run, so the log stays as long as its retention whatever the schedule. A prune
  // that fails is retried by the next run; the run's outcome stands, and the failure is counted:
  // prunes failing for days (a statement timeout on a table grown too large) grow it further.
  // Resolves whether the run's end was recorded (false: another replica marked it interrupted).
  const finish = async (runId: number, outcome: RunEnd): Promise<boolean> => {
    const recorded = await finishRun(db.knex, db, runId, outcome);
    if (!recorded) {
      log.warn(
        { job: name, runId },
        'run ended after another replica took the job over; it stays interrupted',
      );
    }
    await pruneRuns(db.knex, db, name, deps.runRetentionDays ?? DEFAULT_RUN_RETENTION_DAYS).catch(
      (error: unknown) => {
        metrics?.pruneFailures.inc({ table: 'sync_runs' });
        log.warn({ job: name, err: error }, 'could not prune old runs of the job');
      },
    );
    return recorded;
  };
  const execute = async (lease: JobLease | undefined): Promise<JobRun> => {
    const runId =
      lease === undefined
        ? undefined
        : await startRun(db.knex, db, name, settings.holder).catch(failedToStart);
    const startedAt = Date.now();
    const endTimer = metrics?.jobDuration.startTimer({ sync_job: name });
    metrics?.jobRunning.set({ sync_job: name }, 1);
    log.info({ job: name }, 'sync job started');
    // Once the success was written (or tried), the run is not recorded again as failed.
    let recorded = false;
    try {
      await job.run(counts, lease?.signal ?? options.signal, { runId, fence: lease?.fence ?? NO_FENCE });
      // A success that cannot be recorded is a failure like any other (counted, or the alert on
      // failing runs misses it); one that another replica's takeover marked interrupted is not a
      // success either, whatever the body did: counted as a success, it set the job's last success
      // on this replica while sync_runs and the other replicas said otherwise.
      if (runId !== undefined) {
        recorded = true;
        if (!(await finish(runId, { ok: true, counts }))) {
          throw new LeaseLostError(`run of job ${name} ended after another replica took the job over`);
        }
      }
    } catch (error) {
      const text = deps.scrubber?.scrub(describeError(error)) ?? describeError(error);
      if (stoppedByShutdown(error, [options.signal, options.shutdown], lease)) {
        metrics?.jobRuns.inc({ sync_job: name, outcome: 'interrupted' satisfies JobOutcome });
        log.info({ job: name, counts, err: text }, 'sync job interrupted by shutdown');
        if (typeof error === 'object' && error !== null) interruptions.add(error);
        if (runId !== undefined && !recorded) {
          await finish(runId, { ok: 'interrupted', error: text, counts }).catch((e: unknown) =>
            log.error({ job: name, err: e }, 'could not record the interrupted run'),
          );
        }
        throw error;
      }
      const kind = errorKindOf(error);
      metrics?.jobRuns.inc({ sync_job: name, outcome: `${kind}_failure` satisfies JobOutcome });
      if (runId !== undefined && !recorded) {
        await finish(runId, { ok: false, kind, error: text, counts }).catch((e: unknown) =>
          log.error({ job: name, err: e }, 'could not record the failed run'),
        );
      }
      throw error;
    } finally {
      metrics?.jobRunning.set({ sync_job: name }, 0);
      endTimer?.();
    }
    metrics?.jobRuns.inc({ sync_job: name, outcome: 'success' satisfies JobOutcome });
    metrics?.jobLastSuccess.set({ sync_job: name }, Date.now() / 1000);
    log.info({ job: name, counts, ms: Date.now() - startedAt }, 'sync job finished');
    return { job: name, outcome: 'success', counts };
  };

  if (job.exclusive === false) return execute(undefined);
  const leaseName = job.lease ?? name;
  const lease = await (options.wait
    ? JobLease.acquire(db, leaseName, settings, log, {
        signal: options.signal,
        maxWaitMs: CLI_LEASE_WAIT_MS,
      })
    : JobLease.tryAcquire(db, leaseName, settings, log, options.signal)
  ).catch(failedToStart);
  if (lease === undefined) {
    countSkipped(deps, name, 'replica');
    return { job: name, outcome: 'skipped', counts };
  }
  try {
    return await execute(lease);
  } finally {
    await lease.release();
  }
}
