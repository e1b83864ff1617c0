import type { Knex } from 'knex';
import { commentOn } from './commentOn.js';

/**
 * Locations and professionals the platform listed that failed their schema: kept, as the review
 * feed's are, while the rest of their page is stored.
 */
export async function up(knex: Knex, schema: string): Promise<void> {
  await knex.schema.withSchema(schema).createTable('directory_quarantine', (t) => {
    t.bigIncrements('id');
    t.text('resource').notNullable();
    t.text('record_id');
    t.jsonb('raw').notNullable();
    t.text('raw_hash').notNullable().unique({ indexName: 'directory_quarantine_raw_hash_key' });
    t.text('reason').notNullable();
    t.timestamp('first_seen_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('last_seen_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.integer('seen_count').notNullable().defaultTo(1);
  });
  await commentOn(knex, schema, 'directory_quarantine', {
    table:
      'Locations and professionals a listing returned that failed validation: quarantined with the reason, while the rest of their page was stored. A stored record whose listing is quarantined keeps its last valid version and is not marked removed. A record the platform later sends valid is mirrored as usual; its quarantine row stays for audit.',
    columns: {
      id: 'Row number, increasing.',
      resource: 'Which listing returned it: locations or professionals.',
      record_id: "The record's id when it had one (text as sent), else null.",
      raw: 'The record exactly as the platform sent it (JSON).',
      raw_hash: 'md5 of the raw JSON text: a record seen again adds a sighting, not a row.',
      reason: 'The first field that failed the schema, and why.',
      first_seen_at: 'When it was first quarantined.',
      last_seen_at: 'When it was last seen (each listing that returns it again).',
      seen_count: 'How many times it was seen.',
    },
  });
}
