import type { Knex } from 'knex';
import { latestPerId, type ReviewRow } from './reviewRow.js';

export type ReviewSource = 'feed' | 'webhook';

export interface UpsertCounts {
  inserted: number;
  updated: number;
}

const FIELDS = [
  'review_number',
  'created_at',
  'rating',
  'comment',
  'is_verified',
  'reviewer_name',
  'reviewer_email',
  'professional_id',
  'professional_name',
  'observed_at',
] as const;

/**
 * Upserts reviews in one statement. A version observed earlier than the stored one never
 * overwrites it (out-of-order webhook deliveries), but every sighting moves `last_seen_at`.
 * Rows from the feed also stamp `feed_seen_at` and clear `removed_at`: the feed shows them again.
 * `source` is written only on insert. `q` may be a transaction.
 */
export async function upsertReviews(
  q: Knex | Knex.Transaction,
  table: string,
  rows: readonly ReviewRow[],
  source: ReviewSource,
): Promise<UpsertCounts> {
  const unique = latestPerId(rows);
  if (unique.length === 0) return { inserted: 0, updated: 0 };
  const fromFeed = source === 'feed';
  const values = unique.map((r) => ({
    id: r.id,
    ...Object.fromEntries(FIELDS.map((f) => [f, r[f]])),
    source,
    feed_seen_at: fromFeed ? q.fn.now() : null,
  }));
  const newer = '"excluded"."observed_at" >= ??.observed_at';
  const merge: Record<string, Knex.Raw> = {};
  for (const f of FIELDS)
    merge[f] = q.raw(`case when ${newer} then "excluded".?? else ??.?? end`, [table, f, table, f]);
  merge.last_seen_at = q.raw('now()');
  if (fromFeed) {
    merge.feed_seen_at = q.raw('now()');
    merge.removed_at = q.raw('null');
  }
  const result = (await q(table)
    .insert(values)
    .onConflict('id')
    .merge(merge)
    .returning(q.raw('(xmax = 0) as inserted'))) as Array<{ inserted: boolean }>;
  const inserted = result.filter((r) => r.inserted).length;
  return { inserted, updated: result.length - inserted };
}
