import type { Knex } from 'knex';
import { commentOn } from './commentOn.js';

/**
 * Leases of the exclusive jobs (one replica at a time) and the replica that ran each run. A lease
 * is a row, not a session lock, so it works through a transaction-pooling PgBouncer; its token
 * grows with every grant and fences the writes of a replica that lost it.
 */
export async function up(knex: Knex, schema: string): Promise<void> {
  await knex.schema.withSchema(schema).createTable('job_leases', (t) => {
    t.text('job').primary();
    t.text('holder').notNullable();
    t.bigInteger('token').notNullable();
    t.timestamp('acquired_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('renewed_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('expires_at', { useTz: true }).notNullable();
  });
  await knex.schema.withSchema(schema).alterTable('sync_runs', (t) => {
    t.text('replica');
  });
  await commentOn(knex, schema, 'job_leases', {
    table:
      'Which replica holds each exclusive job (review sync, reconcile, directory syncs, webhook health, contacts inbox) and until when. A job runs only on the replica holding its lease; a lease not renewed by its expiry may be taken by another replica. Rows stay after release (expires_at set to the release time) to show the last holder.',
    columns: {
      job: 'The job name, as in sync_runs.job.',
      holder:
        'The replica holding (or that last held) the lease: host, pid and a random suffix, as in sync_runs.replica.',
      token:
        "Fencing token: grows by one at every grant. The job's checkpoint writes check it, so a replica that lost its lease cannot write over the new holder's.",
      acquired_at: 'When the current holder was granted the lease (database clock).',
      renewed_at:
        'When the holder last renewed it (it renews every third of the lease period while the job runs).',
      expires_at:
        'Until when the lease is held; in the past means free (released, or its holder died and it ran out).',
    },
  });
  await commentOn(knex, schema, 'sync_runs', {
    columns: {
      replica:
        'The replica that ran it (host, pid and a random suffix; see job_leases.holder). Null for runs before 012.',
    },
  });
}
