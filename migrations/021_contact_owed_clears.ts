import type { Knex } from 'knex';
import { commentOn } from './commentOn.js';

/**
 * A contact's emptied name or professional is kept as stored until a push that sent the clear
 * succeeds (src/push/contacts/contactsSql.ts), so that a failed push sends it cleared again: what
 * the two columns hold changes meaning, and only their comments change.
 */
export async function up(knex: Knex, schema: string): Promise<void> {
  await commentOn(knex, schema, 'contacts', {
    columns: {
      name: 'Name sent to the platform; while an export has emptied it and no push has sent it cleared yet, the name the platform may still hold (null once cleared there).',
      professional_id:
        'Professional the contact belongs to, if any; while an export has emptied it and no push has sent it cleared yet, the one the platform may still hold (null once cleared there).',
    },
  });
}
