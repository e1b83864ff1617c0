import type { Knex } from 'knex';
import { commentOn } from './commentOn.js';

/** The contacts pushed to the platform, and the per-row log of every push. */
export async function up(knex: Knex, schema: string): Promise<void> {
  await knex.schema.withSchema(schema).createTable('contacts', (t) => {
    t.text('key').primary();
    t.text('email').notNullable();
    t.text('name');
    t.text('external_id');
    t.uuid('professional_id');
    t.text('content_hash').notNullable();
    t.text('outcome').notNullable();
    t.text('platform_contact_id');
    t.text('last_error');
    t.timestamp('pushed_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.schema.withSchema(schema).createTable('contact_push_log', (t) => {
    t.bigIncrements('id');
    t.bigInteger('run_id');
    t.text('file').notNullable();
    t.integer('line');
    t.text('key');
    t.text('operation').notNullable();
    t.text('outcome').notNullable();
    t.text('error');
    t.text('content_hash');
    t.timestamp('at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['run_id'], 'contact_push_log_run_idx');
    t.index(['at'], 'contact_push_log_at_idx');
  });
  await commentOn(knex, schema, 'contacts', {
    table:
      'One row per contact key pushed to the platform: the content last sent (or being sent) and how it went. A re-push sends only what is new, changed or failed.',
    columns: {
      key: 'external_id when the row had one, else the lower-cased email: how the contact is matched.',
      email: 'Email sent to the platform.',
      name: 'Name sent to the platform.',
      external_id: "The CRM's own identifier, the platform's upsert key.",
      professional_id: 'Professional the contact belongs to, if any.',
      content_hash: 'sha256 of the fields sent; a row of a later export with another hash is sent again.',
      outcome:
        'pending (recorded before sending: a crash leaves it, and the next push sends it again), sent, or failed.',
      platform_contact_id: "The platform's contact id, from its answer.",
      last_error: "Why the last push failed (the platform's error text, scrubbed of secrets).",
      pushed_at: 'When the outcome was recorded.',
    },
  });
  await commentOn(knex, schema, 'contact_push_log', {
    table:
      'One row per contact (or rejected row) per push: what was done with it and how it went. Pruned after CONTACTS_LOG_RETENTION_DAYS.',
    columns: {
      run_id: 'The push run (sync_runs.id, job contacts:push).',
      file: 'The export file pushed.',
      line: 'Line of the file the row starts on.',
      key: 'Contact key, when the row had a valid one.',
      operation:
        'create, update, retry, unchanged, rejected (invalid row) or replaced (a later row of the file has the same key).',
      outcome: 'sent_created, sent_updated, unchanged, rejected, replaced or failed.',
      error: 'Why the row was rejected or failed.',
      content_hash: 'sha256 of the fields sent.',
      at: 'When this was recorded.',
    },
  });
}
