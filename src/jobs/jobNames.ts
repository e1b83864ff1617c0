/**
 * The one name of every scheduled job: the scheduler's task, the lease (`job_leases.job`), `sync_runs.job`,
 * `sync_state.job`, the `sync_job` metric label and the logs all use it. The stored names key
 * existing rows, so they never change.
 */
export const JOB = {
  reviews: 'reviews',
  reconcile: 'reviews:reconcile',
  backfill: 'reviews:backfill',
  locations: 'locations',
  professionals: 'professionals',
  webhookHealth: 'webhook-health',
  contactsPush: 'contacts:push',
  contactsInbox: 'contacts:inbox',
  provision: 'provision',
} as const;

export type JobName = (typeof JOB)[keyof typeof JOB];
