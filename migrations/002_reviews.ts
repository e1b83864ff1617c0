import type { Knex } from 'knex';

/** The mirrored review feed (spec 2.1, flattened), queried by users with plain SQL. */
export async function up(knex: Knex, schema: string): Promise<void> {
  await knex.schema.withSchema(schema).createTable('reviews', (t) => {
    t.uuid('id').primary();
    t.text('review_number').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.decimal('rating', null).notNullable(); // numeric without scale: 4.5 stays 4.5, 5.0 stays 5.0
    t.text('comment');
    t.boolean('is_verified').notNullable();
    t.text('reviewer_name');
    t.text('reviewer_email');
    t.uuid('professional_id');
    t.text('professional_name');
    // How the review first reached us; never rewritten, so `source = 'feed'` counts webhook misses.
    t.text('source').notNullable();
    t.timestamp('first_seen_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('last_seen_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    // Last time the feed itself returned the review: reconcile marks removed what it did not see.
    t.timestamp('feed_seen_at', { useTz: true });
    // Platform-side time of the version stored; an older version never overwrites a newer one.
    t.timestamp('observed_at', { useTz: true }).notNullable();
    t.timestamp('removed_at', { useTz: true });
    t.index(['created_at'], 'reviews_created_at_idx');
    t.index(['professional_id', 'created_at'], 'reviews_professional_created_at_idx');
  });
  await knex.raw(`alter table ?? add constraint reviews_source_check check (source in ('feed', 'webhook'))`, [
    `${schema}.reviews`,
  ]);
}
