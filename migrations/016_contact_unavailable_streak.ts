import type { Knex } from 'knex';
import { commentOn } from './commentOn.js';

/**
 * How many pushes in a row the platform failed a contact without refusing it. A record the
 * platform chokes on (a 5xx on every push) counted as "platform unavailable" for ever: its export
 * stayed in the inbox and was pushed again at every poll. With this count such a contact is
 * given up after a few pushes, while the platform answers the others.
 */
export async function up(knex: Knex, schema: string): Promise<void> {
  await knex.schema.withSchema(schema).alterTable('contacts', (t) => {
    t.integer('unavailable_pushes').notNullable().defaultTo(0);
    t.timestamp('unavailable_since', { useTz: true });
  });
  await commentOn(knex, schema, 'contacts', {
    columns: {
      unavailable_pushes:
        'Pushes in a row of this content that the platform failed without refusing it (5xx, no answer); 0 once it answers. At 3, while the platform answers other contacts, the contact is failed for good until a later export.',
      unavailable_since:
        'When the first push of that run of failures started; null when unavailable_pushes is 0.',
    },
  });
}
