import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import { JOB } from './jobs/jobNames.js';
import { JOB_OUTCOMES } from './jobs/runner.js';
import { VERSION } from './version.js';

/** Outcomes of `review_mirror_events_total`: an event's next state after an attempt, and the duplicates. */
const EVENT_OUTCOMES = ['sent', 'retried', 'failed', 'parked', 'possible_duplicate'] as const;
export type EventOutcome = (typeof EVENT_OUTCOMES)[number];

/**
 * Reasons of `review_mirror_webhook_refusals_total`: the webhook server refuses (its `refuse` takes
 * a WebhookRefusalReason) or ignores a delivery with these only, so each series exists from the
 * start.
 */
export const WEBHOOK_REFUSAL_REASONS = [
  'method_not_allowed',
  'ignored_event_type',
  'body_too_large',
  'bad_request',
  'missing_signature',
  'missing_timestamp',
  'malformed_timestamp',
  'bad_signature',
  'stale_timestamp',
  'invalid_json',
  'invalid_event',
  'shutting_down',
  'commit_timeout',
  'commit_failed',
] as const;
export type WebhookRefusalReason = (typeof WEBHOOK_REFUSAL_REASONS)[number];

/** Outcomes of `review_mirror_contacts_rows_total`, one per count of a push's summary. */
const CONTACTS_ROW_OUTCOMES = [
  'sent_created',
  'sent_updated',
  'unchanged',
  'rejected',
  'replaced',
  'failed',
  'still_given_up',
] as const;
export type ContactRowOutcome = (typeof CONTACTS_ROW_OUTCOMES)[number];

/**
 * Creates the series of a labelled counter at 0. prom-client exports one only from its first
 * increment, and `increase()` and `rate()` need a sample before it: a series born at 1 hides its
 * first event, so an alert on a single failure would never fire.
 */
function startAtZero<L extends string>(
  counter: Counter<L>,
  series: ReadonlyArray<Record<L, string>>,
): Counter<L> {
  for (const labels of series) counter.inc(labels, 0);
  return counter;
}

const eachOf = <L extends string>(label: L, values: readonly string[]) =>
  values.map((value) => ({ [label]: value }) as Record<L, string>);

/**
 * Tables whose prunes count their failures in `review_mirror_prune_failures_total`: each starts
 * at 0, so that the first failure is an increase the alert sees.
 */
export const PRUNED_TABLES = ['sync_runs', 'events_outbox', 'contact_push_log'] as const;

/**
 * Removes the one series of an unlabelled gauge. prom-client exports it at 0 from its creation
 * (and after `reset()`): for a gauge read from the database, a value nobody measured that reads
 * as one (no misses, a push in 1970). Such a gauge is exported once it has a value.
 */
export function unsetGauge<G extends Gauge>(gauge: G): G {
  gauge.remove();
  return gauge;
}

/**
 * Every metric the daemon exports, on one registry. Names follow Prometheus conventions: the
 * `review_mirror_` prefix, base units, `_total` on counters, and only low-cardinality labels
 * (sync_job, outcome, reason; never ids, emails or URLs). A job's label is `sync_job`, not `job`: Prometheus
 * overwrites `job` with the scrape job.
 */
export function makeMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'review_mirror_' });
  const registers = [registry];
  const buildInfo = new Gauge({
    name: 'review_mirror_build_info',
    help: 'Always 1; its labels say which review-mirror and which Node.js run.',
    labelNames: ['version', 'node'] as const,
    registers,
  });
  buildInfo.set({ version: VERSION, node: process.version }, 1);
  return {
    registry,
    apiRequests: new Counter({
      name: 'review_mirror_api_requests_total',
      help: 'Partner API attempts by route template and HTTP status (or network, timeout; held_off: not sent, its route held by a Retry-After).',
      labelNames: ['route', 'status'] as const,
      registers,
    }),
    // Apart from the requests' statuses: a 403 is counted there whether it refused the key or one
    // record (a contact who opted out), and only the key's refusals must page.
    apiKeyRefusals: new Counter({
      name: 'review_mirror_api_key_refusals_total',
      help: 'Partner API answers refusing the API key itself: a 401, or a 403 while a check of the key is refused too.',
      registers,
    }),
    apiRetries: new Counter({
      name: 'review_mirror_api_retries_total',
      help: 'Partner API retries by reason (network, timeout, rate_limited, server_error, malformed_body).',
      labelNames: ['reason'] as const,
      registers,
    }),
    apiDuration: new Histogram({
      name: 'review_mirror_api_request_duration_seconds',
      help: 'Partner API attempts from sending to the whole answer read, by route template and status class (2xx, 4xx, 5xx, timeout, network).',
      labelNames: ['route', 'status_class'] as const,
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    }),
    reviewsUpserted: new Counter({
      name: 'review_mirror_reviews_upserted_total',
      help: 'Reviews written to the mirror by source (feed, webhook) and outcome (inserted; updated: one the mirror held, written again whether or not it changed, as the feed overlap re-reads).',
      labelNames: ['source', 'outcome'] as const,
      registers,
    }),
    reviewsQuarantined: new Counter({
      name: 'review_mirror_reviews_quarantined_total',
      help: 'Review records the platform sent that failed validation, quarantined (counted once per distinct record).',
      registers,
    }),
    directoryQuarantined: new Counter({
      name: 'review_mirror_directory_records_quarantined_total',
      help: 'Location and professional records a listing returned that failed validation, quarantined, by resource (counted once per distinct record).',
      labelNames: ['resource'] as const,
      registers,
    }),
    directoryRecordsUnread: new Gauge({
      name: 'review_mirror_directory_records_unread',
      help: 'Directory records whose single read failed for the record alone in the last successful run of their job, by resource and read (detail: a professional read for its location_id; confirm: a record missing from the listings read again).',
      labelNames: ['resource', 'read'] as const,
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
      labelNames: ['sync_job'] as const,
      registers,
    }),
    jobRuns: startAtZero(
      new Counter({
        name: 'review_mirror_job_runs_total',
        help: 'Job runs by sync_job and outcome (success, skipped, retryable_failure, fatal_failure, interrupted: stopped by shutdown).',
        labelNames: ['sync_job', 'outcome'] as const,
        registers,
      }),
      Object.values(JOB).flatMap((job) => JOB_OUTCOMES.map((outcome) => ({ sync_job: job, outcome }))),
    ),
    pruneFailures: startAtZero(
      new Counter({
        name: 'review_mirror_prune_failures_total',
        help: 'Prunes of old rows that failed, by table; each is tried again later, and the table grows meanwhile.',
        labelNames: ['table'] as const,
        registers,
      }),
      eachOf('table', PRUNED_TABLES),
    ),
    jobDuration: new Histogram({
      name: 'review_mirror_job_duration_seconds',
      help: 'Duration of sync job runs.',
      labelNames: ['sync_job'] as const,
      buckets: [0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 1800],
      registers,
    }),
    jobLastSuccess: new Gauge({
      name: 'review_mirror_job_last_success_timestamp_seconds',
      help: 'Unix time of the last successful run of each job.',
      labelNames: ['sync_job'] as const,
      registers,
    }),
    jobRunning: new Gauge({
      name: 'review_mirror_job_running',
      help: '1 while a job is running.',
      labelNames: ['sync_job'] as const,
      registers,
    }),
    webhookDeliveries: new Counter({
      name: 'review_mirror_webhook_deliveries_total',
      help: 'Webhook deliveries committed, by outcome (accepted, duplicate).',
      labelNames: ['outcome'] as const,
      registers,
    }),
    webhookRefusals: startAtZero(
      new Counter({
        name: 'review_mirror_webhook_refusals_total',
        help: 'Webhook deliveries refused, failed or ignored (an authentic event of another type), by reason.',
        labelNames: ['reason'] as const,
        registers,
      }),
      eachOf('reason', WEBHOOK_REFUSAL_REASONS),
    ),
    webhookCommitSeconds: new Histogram({
      name: 'review_mirror_webhook_commit_seconds',
      help: 'Duration of one inbox commit (a batch of deliveries).',
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers,
    }),
    webhookBatchSize: new Histogram({
      name: 'review_mirror_webhook_batch_size',
      help: 'Deliveries grouped into one inbox commit.',
      buckets: [1, 2, 5, 10, 25, 50, 100, 250, 500],
      registers,
    }),
    webhookClockSkew: new Histogram({
      name: 'review_mirror_webhook_clock_skew_seconds',
      help: 'Absolute difference between our clock and X-EE-Timestamp of authentic deliveries.',
      buckets: [1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600],
      registers,
    }),
    webhooks: new Gauge({
      name: 'review_mirror_webhooks',
      help: 'Webhooks the platform listed at the last successful health check, by state (active, inactive, failing = last_error recorded).',
      labelNames: ['state'] as const,
      registers,
    }),
    contactsRows: startAtZero(
      new Counter({
        name: 'review_mirror_contacts_rows_total',
        help: 'Rows of pushed CRM exports, by outcome: sent_created, sent_updated, unchanged, rejected (invalid), replaced (a later row had the same key), failed, still_given_up (given up on an earlier push and unchanged since: not sent).',
        labelNames: ['outcome'] as const,
        registers,
      }),
      eachOf('outcome', CONTACTS_ROW_OUTCOMES),
    ),
    contactsPushDuration: new Histogram({
      name: 'review_mirror_contacts_push_duration_seconds',
      help: 'Time to push one CRM export, from reading its first byte to its last recorded outcome.',
      buckets: [0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600],
      registers,
    }),
    contactsRowsPerSecond: unsetGauge(
      new Gauge({
        name: 'review_mirror_contacts_push_rows_per_second',
        help: 'Rows per second of the last CRM export pushed (read, diffed and sent) by this process; absent before its first push.',
        registers,
      }),
    ),
    contactsLastSuccess: unsetGauge(
      new Gauge({
        name: 'review_mirror_contacts_last_success_timestamp_seconds',
        help: 'When a CRM export was last pushed with no contact failing in that push (Unix time), by whichever process; absent before the first.',
        registers,
      }),
    ),
    events: startAtZero(
      new Counter({
        name: 'review_mirror_events_total',
        help: 'Outbox send attempts by outcome: sent, retried (to be sent again), failed (for good), parked (outcome unknown, for an operator), possible_duplicate (flagged after an unknown outcome or a lapsed claim: the platform may hold it twice).',
        labelNames: ['outcome'] as const,
        registers,
      }),
      eachOf('outcome', EVENT_OUTCOMES),
    ),
    outboxBacklog: unsetGauge(
      new Gauge({
        name: 'review_mirror_outbox_backlog',
        help: 'Events in the outbox still to send (pending or being sent), as last read by this replica; absent before its first reading.',
        registers,
      }),
    ),
    outboxOldestPending: unsetGauge(
      new Gauge({
        name: 'review_mirror_outbox_oldest_pending_seconds',
        help: 'Age of the oldest event still pending in the outbox (0 when none), as last read by this replica; absent before its first reading.',
        registers,
      }),
    ),
    outboxListening: unsetGauge(
      new Gauge({
        name: 'review_mirror_outbox_listening',
        help: "1 while this replica's outbox LISTEN session is known to receive notifications (a NOTIFY from another session reached it); 0 while it connects, is lost, or receives none (a transaction pooler): new events then wait for the poll. Absent without a LISTEN session (embedded database, or DB_POOLER=transaction without DATABASE_LISTEN_URL).",
        registers,
      }),
    ),
    eventOutcomesKept: new Gauge({
      name: 'review_mirror_event_outcomes_kept',
      help: 'Platform answers to events that the database could not take, kept in memory until it can: lost if the process stops first.',
      registers,
    }),
    // No label, so no series to create: prom-client exports an unlabelled counter at 0 at once.
    eventOutcomesLost: new Counter({
      name: 'review_mirror_event_outcomes_lost_total',
      help: 'Platform answers to events never recorded: kept in memory when the process stopped, or refused by the database. Each event is taken back as an unknown outcome (possible duplicate, or parked).',
      registers,
    }),
    eventLatency: new Histogram({
      name: 'review_mirror_event_enqueue_to_accepted_seconds',
      help: 'From an event entering the outbox to the platform accepting it.',
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5, 30, 300],
      registers,
    }),
    webhookMissRatio: unsetGauge(
      new Gauge({
        name: 'review_mirror_webhook_miss_ratio',
        help: 'Share of reviews first seen in the 24 h before the last successful health check that reached us by the feed rather than a webhook; absent until such a check is read.',
        registers,
      }),
    ),
  };
}

export type Metrics = ReturnType<typeof makeMetrics>;
