import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

/**
 * Every metric the daemon exports, on one registry. Names follow Prometheus conventions: the
 * `review_mirror_` prefix, base units, `_total` on counters, and only low-cardinality labels
 * (job, outcome, reason; never ids, emails or URLs).
 */
export function makeMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'review_mirror_' });
  const registers = [registry];
  return {
    registry,
    apiRequests: new Counter({
      name: 'review_mirror_api_requests_total',
      help: 'Partner API attempts by route template and HTTP status (or network, timeout).',
      labelNames: ['route', 'status'] as const,
      registers,
    }),
    apiRetries: new Counter({
      name: 'review_mirror_api_retries_total',
      help: 'Partner API retries by reason (network, timeout, rate_limited, server_error, malformed_body).',
      labelNames: ['reason'] as const,
      registers,
    }),
    reviewsUpserted: new Counter({
      name: 'review_mirror_reviews_upserted_total',
      help: 'Reviews written to the mirror by source (feed, webhook) and outcome (inserted, updated).',
      labelNames: ['source', 'outcome'] as const,
      registers,
    }),
    reviewsRemoved: new Counter({
      name: 'review_mirror_reviews_removed_total',
      help: 'Reviews marked removed by a reconcile because the feed no longer returns them.',
      registers,
    }),
    newestReview: new Gauge({
      name: 'review_mirror_newest_review_timestamp_seconds',
      help: 'created_at of the newest review a completed walk has mirrored (its age is the freshness).',
      registers,
    }),
    lastCompleteWalk: new Gauge({
      name: 'review_mirror_last_complete_walk_timestamp_seconds',
      help: 'Unix time at which a walk of the feed or directory last reached its end, by job.',
      labelNames: ['job'] as const,
      registers,
    }),
    jobRuns: new Counter({
      name: 'review_mirror_job_runs_total',
      help: 'Sync job runs by job and outcome (success, failed, skipped).',
      labelNames: ['job', 'outcome'] as const,
      registers,
    }),
    jobDuration: new Histogram({
      name: 'review_mirror_job_duration_seconds',
      help: 'Duration of sync job runs.',
      labelNames: ['job'] as const,
      buckets: [0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 1800],
      registers,
    }),
    jobLastSuccess: new Gauge({
      name: 'review_mirror_job_last_success_timestamp_seconds',
      help: 'Unix time of the last successful run of each job.',
      labelNames: ['job'] as const,
      registers,
    }),
    jobRunning: new Gauge({
      name: 'review_mirror_job_running',
      help: '1 while a job is running.',
      labelNames: ['job'] as const,
      registers,
    }),
  };
}

export type Metrics = ReturnType<typeof makeMetrics>;
