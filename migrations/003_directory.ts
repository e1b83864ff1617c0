import type { Knex } from 'knex';

/**
 * The platform's locations and professionals (spec 2.2, 2.3), active and inactive, and the
 * review indexes users' lookups need. `removed_at` marks records a complete listing no longer
 * returned; it is cleared when one comes back.
 */
export async function up(knex: Knex, schema: string): Promise<void> {
  await knex.schema.withSchema(schema).createTable('locations', (t) => {
    t.integer('id').primary();
    t.text('slug').notNullable();
    t.text('name').notNullable();
    t.boolean('active').notNullable();
    t.text('address_line1');
    t.text('address_line2');
    t.text('address_city');
    t.text('address_state');
    t.text('address_zip');
    t.text('profile_url').notNullable();
    t.text('default_survey_url');
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.timestamp('first_seen_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('last_seen_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('removed_at', { useTz: true });
    t.index(['slug'], 'locations_slug_idx');
  });
  await knex.schema.withSchema(schema).createTable('professionals', (t) => {
    t.uuid('id').primary();
    t.text('slug').notNullable();
    t.text('first_name').notNullable();
    t.text('last_name').notNullable();
    t.boolean('active').notNullable();
    // Only the single read returns it (spec 2.3); no foreign key, since the two lists are read apart.
    t.integer('location_id');
    t.text('profile_url').notNullable();
    t.text('default_survey_url');
    t.timestamp('created_at', { useTz: true }).notNullable();
    // When location_id was last read from the single record; null: never (read it next run).
    t.timestamp('detail_fetched_at', { useTz: true });
    t.timestamp('first_seen_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('last_seen_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('removed_at', { useTz: true });
    t.index(['slug'], 'professionals_slug_idx');
    t.index(['location_id'], 'professionals_location_id_idx');
  });
  // Users look reviews up by their human-readable number, and list what is currently public.
  await knex.schema.withSchema(schema).alterTable('reviews', (t) => {
    t.index(['review_number'], 'reviews_review_number_idx');
  });
  await knex.raw('create index reviews_removed_at_idx on ?? (removed_at) where removed_at is not null', [
    `${schema}.reviews`,
  ]);
}
