import type { PullContext } from './context.js';
import { RECONCILE_JOB, reconcileReviews } from './reconcileReviews.js';
import type { JobBody } from './runJob.js';
import { LOCATIONS_JOB, PROFESSIONALS_JOB, syncLocations, syncProfessionals } from './syncDirectory.js';
import { REVIEWS_JOB, syncReviews } from './syncReviews.js';

export const SYNC_TARGETS = ['reviews', 'locations', 'professionals', 'all'] as const;
export type SyncTarget = (typeof SYNC_TARGETS)[number];

export interface PullJob {
  /** The name in `sync_state`, `sync_runs`, metrics and logs. */
  readonly name: string;
  readonly body: JobBody;
}

/**
 * The jobs behind `sync <target> [--full]`, in order: for reviews `--full` is the reconcile;
 * for professionals it re-reads every single record; locations are always listed whole.
 */
export function pullJobs(ctx: PullContext, target: SyncTarget, full: boolean): PullJob[] {
  const reviews: PullJob = full
    ? { name: RECONCILE_JOB, body: (counts, signal) => reconcileReviews(ctx, counts, signal) }
    : { name: REVIEWS_JOB, body: (counts, signal) => syncReviews(ctx, counts, signal) };
  const locations: PullJob = {
    name: LOCATIONS_JOB,
    body: (counts, signal) => syncLocations(ctx, counts, signal),
  };
  const professionals: PullJob = {
    name: PROFESSIONALS_JOB,
    body: (counts, signal) => syncProfessionals(ctx, counts, { full }, signal),
  };
  switch (target) {
    case 'reviews':
      return [reviews];
    case 'locations':
      return [locations];
    case 'professionals':
      return [professionals];
    case 'all':
      return [reviews, locations, professionals];
  }
}
