import type { Knex } from 'knex';
import type { Db } from '../db/connect.js';

/**
 * After a complete reconcile walk that started at `walkStartedAt`: every review the walk did not
 * return (not seen by the feed since the walk began) and that existed before it began is no
 * longer public. Returns how many were marked.
 */
export async function markRemovedReviews(
  q: Knex | Knex.Transaction,
  db: Db,
  walkStartedAt: Date,
): Promise<number> {
  return q(db.table('reviews'))
    .whereNull('removed_at')
    .where('first_seen_at', '<', walkStartedAt)
    .where((w) => w.whereNull('feed_seen_at').orWhere('feed_seen_at', '<', walkStartedAt))
    .update({ removed_at: q.fn.now() });
}
