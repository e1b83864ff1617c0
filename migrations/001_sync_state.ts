import type { Knex } from 'knex';

/** Checkpoints of every sync job, and a log of every run. */
export async function up(knex: Knex, schema: string): Promise<void> {
  await knex.schema.withSchema(schema).createTable('sync_state', (t) => {
    t.text('job').primary();
    // Newest created_at known to be fully mirrored; the next walk reads from here minus the overlap.
    t.timestamp('watermark', { useTz: true });
    // The unfinished walk, checkpointed after every page; null when no walk is in progress.
    t.text('cursor');
    t.timestamp('walk_since', { useTz: true });
    t.timestamp('walk_started_at', { useTz: true });
    t.timestamp('walk_newest', { useTz: true });
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.schema.withSchema(schema).createTable('sync_runs', (t) => {
    t.bigIncrements('id');
    t.text('job').notNullable();
    t.timestamp('started_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('finished_at', { useTz: true });
    t.text('outcome').notNullable().defaultTo('running');
    t.jsonb('counts').notNullable().defaultTo('{}');
    t.text('error');
    t.index(['job', 'started_at']);
  });
}
