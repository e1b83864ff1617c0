import type { Knex } from 'knex';

/** The webhook receiver's inbox, and the platform's webhooks as we last knew them. */
export async function up(knex: Knex, schema: string): Promise<void> {
  await knex.schema.withSchema(schema).createTable('webhook_inbox', (t) => {
    t.bigIncrements('id');
    // One row per distinct event: a duplicate delivery (same data.id) adds nothing here.
    t.uuid('review_id').notNullable();
    t.text('event').notNullable();
    // The event's own time (body `timestamp`), and when the first delivery of it committed.
    t.timestamp('event_at', { useTz: true }).notNullable();
    t.timestamp('received_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    // The body exactly as signed, for audit and replay.
    t.text('body').notNullable();
    t.unique(['review_id', 'event'], { indexName: 'webhook_inbox_review_event_key' });
    t.index(['received_at'], 'webhook_inbox_received_at_idx');
  });
  await knex.schema.withSchema(schema).createTable('webhooks', (t) => {
    t.text('id').primary();
    t.text('url').notNullable();
    t.text('description');
    t.specificType('events', 'text[]').notNullable().defaultTo('{}');
    // Shown once by the platform at registration; null for webhooks registered elsewhere.
    // Whoever can read this column can forge deliveries: protect the database accordingly.
    t.text('signing_secret');
    t.timestamp('created_at', { useTz: true });
    t.timestamp('registered_at', { useTz: true });
    t.timestamp('deleted_at', { useTz: true });
    t.boolean('is_active');
    t.text('last_error');
    // Last time the platform's list showed this webhook.
    t.timestamp('checked_at', { useTz: true });
  });
}
