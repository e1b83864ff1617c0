import type { Gauge } from 'prom-client';
import { valueWithin } from '../boundedWait.js';
import type { Db } from '../db/connect.js';
import { describeError } from '../errors.js';
import { JOB } from '../jobs/jobNames.js';
import { type LastSuccess, readLastCompletePush, readLastSuccesses } from '../jobs/lastSuccessSql.js';
import type { Logger } from '../log.js';
import { type Metrics, unsetGauge } from '../metrics.js';
import { readCheckpoint } from '../pull/syncStateSql.js';
import { healthOfCounts, WEBHOOK_STATES } from '../webhooks/health.js';

/** The jobs whose successful run is a walk that reached its end (what `lastCompleteWalk` counts). */
const WALK_JOBS: readonly string[] = [JOB.reviews, JOB.reconcile, JOB.locations, JOB.professionals];

/**
 * The directory jobs' counts of records whose single read failed for the record alone (they are
 * kept and read again next run, so the run succeeds): the `read` of
 * `review_mirror_directory_records_unread{resource, read}` each is exported as.
 */
const UNREAD_COUNTS = [
  { job: JOB.locations, read: 'confirm', count: 'unconfirmed' },
  { job: JOB.professionals, read: 'detail', count: 'details_failed' },
  { job: JOB.professionals, read: 'confirm', count: 'unconfirmed' },
] as const;

/**
 * How often every replica reads the freshness gauges from the mirror: the age they give is off
 * by at most this (plus a scrape interval), much less than what the alerts look for (30 minutes).
 * The webhook gauges lag a health check by as much, on the replica that ran it too: far less than
 * the check's period (WEBHOOK_HEALTH_CRON, 5 minutes) and the alerts' `for` (15 minutes, 1 hour).
 */
export const MIRROR_GAUGES_REFRESH_MS = 10_000;

export interface MirrorGaugesDeps {
  readonly db: Db;
  readonly log: Logger;
  readonly metrics: Pick<
    Metrics,
    | 'newestReview'
    | 'lastCompleteWalk'
    | 'jobLastSuccess'
    | 'contactsLastSuccess'
    | 'webhooks'
    | 'webhookMissRatio'
    | 'directoryRecordsUnread'
  >;
}

/**
 * The freshness gauges as the mirror says, on every replica. Only the replica holding a job's
 * lease runs it and sets them in passing; the others (and any replica after a restart) would
 * export 0, "56 years old", or nothing. They are read from the database at start-up and then on
 * a timer, never at scrape time: a scrape answers at once from the last values, also while the
 * database is down. A value never moves back: a job of this process may have set a newer one than
 * a read that was under way.
 *
 * The contacts push's last success is such a time too: the inbox job, which pushes, runs on one
 * replica, and `contacts push` in a process of its own.
 *
 * The webhook gauges (`webhooks{state}`, `webhookMissRatio`) are levels, not times: what the last
 * successful health check saw, wherever it ran. Set only here, so that a replica that no longer
 * wins that job does not export what it once saw (a `failing` webhook long gone) for good. So are
 * the directory's unread records (`directoryRecordsUnread`): what the last successful run of each
 * directory job could not read.
 */
export class MirrorGauges {
  #timer: NodeJS.Timeout | undefined;
  #reading: Promise<boolean> | undefined;
  #failing = false;

  constructor(
    private readonly deps: MirrorGaugesDeps,
    private readonly everyMs = MIRROR_GAUGES_REFRESH_MS,
  ) {}

  /**
   * Reads the mirror once; resolves whether it could (never rejects). At most one read is under
   * way: a database that hangs holds one connection, not one more per tick.
   */
  refresh(): Promise<boolean> {
    this.#reading ??= this.#read().finally(() => {
      this.#reading = undefined;
    });
    return this.#reading;
  }

  /** `refresh`, waited for at most `boundMs` (start-up goes on without it; the timer retries). */
  refreshWithin(boundMs: number): Promise<boolean> {
    return valueWithin(this.refresh(), boundMs, false);
  }

  start(): void {
    this.#timer ??= setInterval(() => void this.refresh(), this.everyMs);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  async #read(): Promise<boolean> {
    const { db, log, metrics } = this.deps;
    try {
      const [checkpoint, successes, contactsPushed] = await Promise.all([
        readCheckpoint(db.knex, db, JOB.reviews),
        readLastSuccesses(db.knex, db, Object.values(JOB)),
        readLastCompletePush(db.knex, db, [JOB.contactsInbox, JOB.contactsPush]),
      ]);
      // The review sync sets it from the same watermark when its walk completes.
      if (checkpoint.watermark !== null) {
        await raise(metrics.newestReview, {}, new Date(checkpoint.watermark).getTime() / 1000);
      }
      if (contactsPushed !== undefined) {
        await raise(metrics.contactsLastSuccess, {}, contactsPushed.getTime() / 1000);
      }
      const health = successes.get(JOB.webhookHealth);
      if (health !== undefined) this.#setWebhookGauges(health);
      for (const { job, read, count } of UNREAD_COUNTS) {
        const run = successes.get(job);
        // A run counts only the reads that failed: none counted is none failed.
        if (run !== undefined)
          metrics.directoryRecordsUnread.set({ resource: job, read }, run.counts[count] ?? 0);
      }
      for (const [job, { finishedAt }] of successes) {
        const seconds = finishedAt.getTime() / 1000;
        await raise(metrics.jobLastSuccess, { sync_job: job }, seconds);
        if (WALK_JOBS.includes(job)) await raise(metrics.lastCompleteWalk, { sync_job: job }, seconds);
      }
      if (this.#failing) log.info('freshness and webhook gauges read from the database again');
      this.#failing = false;
      return true;
    } catch (error) {
      // Said once per outage: the gauges keep their last values meanwhile.
      if (!this.#failing) {
        log.warn(
          { err: describeError(error) },
          'freshness and webhook gauges not read from the database; they keep their last values',
        );
      }
      this.#failing = true;
      return false;
    }
  }

  /**
   * Sets the webhook gauges to what `run`, the newest successful health run, saw. Levels follow
   * the database as it is, with no hold on a value once read: reads come one at a time, each
   * seeing every run the last one saw (unless the database lost it, when it is the truth).
   */
  #setWebhookGauges(run: LastSuccess): void {
    const { metrics } = this.deps;
    const seen = healthOfCounts(run.counts);
    if (seen === undefined) {
      // Recorded by an older version (a rolling upgrade), which exports what it saw on its own
      // replica: this one exports nothing, so that max() over replicas is that newer check. Not
      // reset(): an unlabelled gauge reset exports 0, no misses, which nobody measured.
      metrics.webhooks.reset();
      unsetGauge(metrics.webhookMissRatio);
      return;
    }
    for (const state of WEBHOOK_STATES) metrics.webhooks.set({ state }, seen.states[state]);
    // No review first seen in the window: none missed, on every replica alike.
    metrics.webhookMissRatio.set(seen.miss.ratio ?? 0);
  }
}

/** Sets `labels` of `gauge` to `seconds` unless it already holds a later time. */
async function raise<L extends string>(
  gauge: Gauge<L>,
  labels: Partial<Record<L, string>>,
  seconds: number,
): Promise<void> {
  const wanted = Object.entries(labels);
  const current = (await gauge.get()).values.find((v) =>
    wanted.every(([name, value]) => (v.labels as Record<string, unknown>)[name] === value),
  );
  if (current === undefined || current.value < seconds) gauge.set(labels, seconds);
}
