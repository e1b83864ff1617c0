import type { Knex } from 'knex';
import { commentOn } from './commentOn.js';

/**
 * What two columns of the outbox hold changes meaning, and only their comments change.
 * `possible_duplicate` has been set on events the platform may hold once (one failed after an
 * unknown outcome, a parked one an operator retries), not only on one sent again; now a parked
 * event an operator discards keeps it too, so that a later retry is known to be a possible second
 * copy. `last_error` may now be the note of an outcome the database refused in full, a sent one's
 * included (src/push/events/outboxSender.ts).
 */
export async function up(knex: Knex, schema: string): Promise<void> {
  await commentOn(knex, schema, 'events_outbox', {
    columns: {
      possible_duplicate:
        'The platform may already hold it, from a request whose outcome was unknown (a timeout, a lost connection, a 5xx but 503, a dead worker): set when such an event is sent again (the platform may have it twice), failed, or, once parked, retried or discarded by an operator, so that any later send is known to be a possible second copy. Never cleared.',
      last_error:
        "Why the last attempt failed (scrubbed of secrets); on a discarded event, that an operator discarded it (and why it was parked). When the database refused to store the platform's full answer (an operator's check or trigger), a note saying so and why, even on a sent event: only its state was recorded, and the answer is in the log line `event outcome recorded without the platform's full answer`.",
    },
  });
}
