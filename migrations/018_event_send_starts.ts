import type { Knex } from 'knex';
import { commentOn } from './commentOn.js';

/**
 * A claim that lapsed was charged a lapse whether or not its request had started: the claims a
 * killed worker held only queued behind the one in flight were charged too, so a replica in a
 * crash loop failed events it never sent. `unstarted_claim_of` names the worker whose claim has
 * not started its request yet; a lapsed claim it still names was never sent. A worker's name, not
 * a flag: a replica of an earlier version claims and sends without touching it, and a name left
 * from an earlier claim is never that replica's, so its claims still count as possibly sent.
 */
export async function up(knex: Knex, schema: string): Promise<void> {
  await knex.schema.withSchema(schema).alterTable('events_outbox', (t) => {
    t.text('unstarted_claim_of');
  });
  await commentOn(knex, schema, 'events_outbox', {
    columns: {
      unstarted_claim_of:
        'While sending: the worker whose claim has not started its request yet (written at the claim, cleared just before the POST). A lapsed claim still named here was never sent: it is due again with its attempt refunded, not counted as a lapse nor flagged possible_duplicate. Meaningless in other states.',
    },
  });
}
