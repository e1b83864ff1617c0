import type { Knex } from 'knex';
import { commentOn } from './commentOn.js';

/**
 * Scratch space of a push: the last valid row of each key of the file being pushed. Diffing in
 * the database keeps the daemon's memory flat whatever the export's size. A regular table, not a
 * TEMP one, so it works through a transaction-pooling PgBouncer; unlogged, since a crash loses
 * nothing a re-push does not rebuild.
 */
export async function up(knex: Knex, schema: string): Promise<void> {
  await knex.schema.withSchema(schema).createTable('contact_push_staging', (t) => {
    t.uuid('push_id').notNullable();
    t.text('key').notNullable();
    t.integer('line').notNullable();
    t.text('email').notNullable();
    t.text('name');
    t.text('external_id');
    t.uuid('professional_id');
    t.text('content_hash').notNullable();
    t.timestamp('staged_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['push_id', 'key']);
    t.index(['push_id', 'line'], 'contact_push_staging_line_idx');
  });
  await knex.raw('alter table ?? set unlogged', [`${schema}.contact_push_staging`]);
  await commentOn(knex, schema, 'contact_push_staging', {
    table:
      'Scratch rows of the contacts pushes in progress: the last valid row of each key of the file. Emptied when a push ends; rows a killed push left are pruned after a day. Not for querying: see contacts and contact_push_log.',
    columns: {
      push_id: 'The push the row belongs to (one per file pushed).',
      key: 'Contact key: external_id, else the lower-cased email.',
      line: 'Line of the file the row starts on (the last row of its key).',
      email: 'Email as it will be sent.',
      name: 'Name as it will be sent.',
      external_id: "The CRM's identifier.",
      professional_id: 'Professional the contact belongs to, if any.',
      content_hash: 'sha256 of the fields to send, compared with contacts.content_hash.',
      staged_at: 'When the row was staged.',
    },
  });
}
