import type { Knex } from 'knex';
import { commentOn } from './commentOn.js';

/** Records the platform sent that failed their schema: kept, never silently dropped. */
export async function up(knex: Knex, schema: string): Promise<void> {
  await knex.schema.withSchema(schema).createTable('review_quarantine', (t) => {
    t.bigIncrements('id');
    t.text('review_id');
    t.jsonb('raw').notNullable();
    // One row per distinct record: the same bad record seen again only counts another sighting.
    t.text('raw_hash').notNullable().unique({ indexName: 'review_quarantine_raw_hash_key' });
    t.text('reason').notNullable();
    t.text('source').notNullable();
    t.timestamp('first_seen_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('last_seen_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.integer('seen_count').notNullable().defaultTo(1);
  });
  await commentOn(knex, schema, 'review_quarantine', {
    table:
      'Review records the platform sent that failed validation: quarantined with the reason, while the rest of their page was stored. A record the platform later sends valid is mirrored in reviews as usual; its quarantine row stays for audit.',
    columns: {
      review_id: "The record's id when it had a usable one (text as sent), else null.",
      raw: 'The record exactly as the platform sent it (JSON).',
      raw_hash: 'md5 of the raw JSON text: a record seen again adds a sighting, not a row.',
      reason: 'The first field that failed the schema, and why.',
      source: 'Where it came from: feed (a page of the review feed).',
      first_seen_at: 'When it was first quarantined.',
      last_seen_at: 'When it was last seen (each walk that reads it again).',
      seen_count: 'How many times it was seen.',
    },
  });
}
