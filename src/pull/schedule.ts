import type { Config } from '../config/schema.js';
import type { Db } from '../db/connect.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics.js';
import type { PartnerApi } from '../partner-api/client.js';
import type { Scheduler } from '../scheduler.js';
import type { PullContext } from './context.js';
import { pullJobs } from './jobs.js';
import { runJob } from './runJob.js';

export interface PullScheduleOptions {
  readonly db: Db;
  readonly api: PartnerApi;
  readonly log: Logger;
  readonly metrics: Metrics;
  readonly config: Config;
  readonly scheduler: Scheduler;
}

/**
 * The pull jobs of `review-mirror run`: the incremental review sync (and once at start-up), the
 * directory (locations, then professionals), and the daily reconcile, each on its cron
 * expression. The scheduler never overlaps a job in this process; the job lock makes another
 * replica skip its run instead of queueing behind ours.
 */
export function schedulePullJobs({ db, api, log, metrics, config, scheduler }: PullScheduleOptions): void {
  const ctx: PullContext = {
    db,
    api,
    log,
    metrics,
    overlapMs: config.sync.overlapMs,
    detailConcurrency: config.sync.detailConcurrency,
  };
  const runAll = (jobs: ReturnType<typeof pullJobs>) => async (signal: AbortSignal) => {
    for (const job of jobs) await runJob(db, log, job.name, job.body, { wait: false, signal });
  };
  const reviews = runAll(pullJobs(ctx, 'reviews', false));
  scheduler.add('reviews', config.sync.reviewsCron, reviews);
  scheduler.add(
    'directory',
    config.sync.directoryCron,
    runAll([...pullJobs(ctx, 'locations', false), ...pullJobs(ctx, 'professionals', false)]),
  );
  scheduler.add('reviews:reconcile', config.sync.reconcileCron, runAll(pullJobs(ctx, 'reviews', true)));
  if (config.sync.reviewsCron !== 'off') void scheduler.trigger('reviews', reviews);
}
