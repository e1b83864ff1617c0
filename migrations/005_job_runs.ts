import type { Knex } from 'knex';

/** Whether a failed run is worth retrying: the runner decides on the error taxonomy and says so. */
export async function up(knex: Knex, schema: string): Promise<void> {
  await knex.schema.withSchema(schema).alterTable('sync_runs', (t) => {
    t.text('error_kind');
  });
  await knex.raw(
    `comment on column ??.error_kind is 'For a failed run: retryable (the platform or the database may recover; the next tick retries) or fatal (bad API key, a contract the platform broke: nothing changes until someone acts). Null otherwise.'`,
    [`${schema}.sync_runs`],
  );
}
