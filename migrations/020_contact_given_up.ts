import type { Knex } from 'knex';
import { commentOn } from './commentOn.js';

/**
 * What `unavailable_pushes` says since a contact is given up whether or not other contacts were
 * taken beside it, and stays given up for the content it failed with (src/push/contacts/
 * unavailableStreak.ts): only its comment changes.
 */
export async function up(knex: Knex, schema: string): Promise<void> {
  await commentOn(knex, schema, 'contacts', {
    columns: {
      unavailable_pushes:
        'Pushes in a row of this content that the platform failed without refusing it (5xx, 408, no usable answer); 0 once it answers. 3 with outcome failed: given up (the platform answered otherwise), and not sent again until an export changes the contact or a full push (contacts push --full); a streak not given up (the platform did not answer at all) is held at 2.',
    },
  });
}
