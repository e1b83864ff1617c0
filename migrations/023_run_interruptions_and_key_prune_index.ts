import type { Knex } from 'knex';
import { commentOn } from './commentOn.js';

/**
 * The hourly prune of event_keys finds the keys past EVENTS_KEY_RETENTION_DAYS by `sent_at`, which
 * had no index: each prune read the whole table (a key per event enqueued over 400 days by
 * default) at least once, 0.57 s at 3 million keys against 1.4 ms with this one. Partial: a key
 * gets its `sent_at` only when its outbox row is pruned, so enqueueing (the partner's own
 * transaction) never writes to it. A plain CREATE INDEX, as every earlier one: migrations run in
 * one transaction, where CONCURRENTLY cannot; it holds enqueues back (they wait, none fails) for
 * one scan of the table, 1.5 s at 3 million keys.
 *
 * And a run stopped by its process's shutdown is now recorded interrupted by the runner itself.
 */
export async function up(knex: Knex, schema: string): Promise<void> {
  await knex.raw('create index event_keys_sent_at_idx on ?? (sent_at) where sent_at is not null', [
    `${schema}.event_keys`,
  ]);
  await knex.raw(
    `comment on index ?? is 'Finds the keys the outbox prune forgets (sent_at past EVENTS_KEY_RETENTION_DAYS) without reading the whole table.'`,
    [`${schema}.event_keys_sent_at_idx`],
  );
  await commentOn(knex, schema, 'sync_runs', {
    columns: {
      outcome:
        'running, success, failed, or interrupted: stopped by its process shutting down (a deploy), or its process died mid-run (then marked so by the next run of the job), or another replica took the job over. Interrupted runs are no failures of the job.',
      error:
        'For a failed run: the error text, scrubbed of secrets. For a run its shutdown stopped: what it stopped (a back-off cut short names the answer it waited out). Null otherwise.',
    },
  });
}
