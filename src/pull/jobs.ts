import type { Config } from '../config/schema.js';
import { JOB } from '../jobs/jobNames.js';
import type { RunnableJob } from '../jobs/runner.js';
import type { JobSpec } from '../jobs/scheduler.js';
import { type BackfillRange, backfillReviews } from './backfillReviews.js';
import type { PullContext } from './context.js';
import { reconcileReviews } from './reconcileReviews.js';
import { syncLocations, syncProfessionals } from './syncDirectory.js';
import { syncReviews } from './syncReviews.js';

export const SYNC_TARGETS = ['reviews', 'locations', 'professionals', 'all'] as const;
export type SyncTarget = (typeof SYNC_TARGETS)[number];

const reviewsJob = (ctx: PullContext) =>
  ({
    name: JOB.reviews,
    run: (counts, signal, run) => syncReviews(ctx, counts, signal, run?.fence),
  }) satisfies RunnableJob;
const reconcileJob = (ctx: PullContext) =>
  ({
    name: JOB.reconcile,
    run: (counts, signal, run) => reconcileReviews(ctx, counts, signal, run?.fence),
  }) satisfies RunnableJob;
const locationsJob = (ctx: PullContext) =>
  ({
    name: JOB.locations,
    run: (counts, signal, run) => syncLocations(ctx, counts, signal, run?.fence),
  }) satisfies RunnableJob;
const professionalsJob = (ctx: PullContext, full: boolean) =>
  ({
    name: JOB.professionals,
    run: (counts, signal, run) => syncProfessionals(ctx, counts, { full }, signal, run?.fence),
  }) satisfies RunnableJob;

/** A date-range backfill: its own job (and lease), so it runs beside the incremental sync. */
const backfillJob = (ctx: PullContext, range: BackfillRange) =>
  ({
    name: JOB.backfill,
    run: (counts, signal, run) => backfillReviews(ctx, range, counts, signal, run?.fence),
  }) satisfies RunnableJob;

/**
 * The jobs behind `sync <target> [--full | --since T [--until T]]`, in order: for reviews
 * `--full` is the reconcile and `--since` a backfill of that range; for professionals `--full`
 * re-reads every single record; locations are always listed whole.
 */
export function pullJobs(
  ctx: PullContext,
  target: SyncTarget,
  full: boolean,
  range?: BackfillRange,
): RunnableJob[] {
  const reviews = range ? backfillJob(ctx, range) : full ? reconcileJob(ctx) : reviewsJob(ctx);
  switch (target) {
    case 'reviews':
      return [reviews];
    case 'locations':
      return [locationsJob(ctx)];
    case 'professionals':
      return [professionalsJob(ctx, full)];
    case 'all':
      return [reviews, locationsJob(ctx), professionalsJob(ctx, full)];
  }
}

/**
 * The pull jobs of `review-mirror run`: the incremental review sync (also at start-up), locations
 * and professionals on the directory schedule, and the daily reconcile. Each runs on one replica
 * at a time; another replica skips its tick instead of queueing behind it.
 */
export function pullJobSpecs(ctx: PullContext, sync: Config['sync']): JobSpec[] {
  return [
    { ...reviewsJob(ctx), schedule: sync.reviewsCron, runAtStart: sync.reviewsCron !== 'off' },
    { ...locationsJob(ctx), schedule: sync.directoryCron },
    { ...professionalsJob(ctx, false), schedule: sync.directoryCron },
    { ...reconcileJob(ctx), schedule: sync.reconcileCron },
  ];
}
