import type { Knex } from 'knex';
import { preparedRaw, type Queryable, type Tables } from '../db/queryable.js';
import { arrayLiteral } from '../mirror/arrayLiteral.js';
import { compareText, latestPerId, toReviewRow } from '../mirror/reviewRow.js';
import { reviewUpsertStatement } from '../mirror/reviewsSql.js';
import type { ReviewCreatedEvent } from './event.js';

/** A verified, parsed delivery, ready to be stored. */
export interface Delivery {
  readonly event: ReviewCreatedEvent;
  /** The body exactly as received (and signed). */
  readonly body: string;
  /**
   * The platform-side time of this version of the review: the verified X-EE-Timestamp, never later
   * than when it reached us. A delivery can then never outrank a later reading of the feed.
   */
  readonly observedAt: Date;
}

export type DeliveryOutcome = 'accepted' | 'duplicate';

/** When the last delivery was received; null before the first one. */
export async function readLastDeliveryAt(q: Queryable, db: Tables): Promise<Date | null> {
  const last = await q(db.table('webhook_inbox')).max({ at: 'received_at' }).first();
  return last?.at ?? null;
}

/**
 * Stores a batch of deliveries in one statement, so one round trip and one commit: a new inbox
 * row per event not seen before, and the reviews upserted with source `webhook`. Every delivery,
 * duplicate or not, goes through the upsert, which records the sighting and never lets an older
 * version overwrite a newer one. Returns one outcome per delivery, in order: the first delivery
 * of an event is `accepted`.
 */
export async function storeDeliveries(
  q: Queryable,
  db: Tables,
  deliveries: readonly Delivery[],
): Promise<DeliveryOutcome[]> {
  if (deliveries.length === 0) return [];
  const keyOf = (d: Delivery) => `${d.event.data.id}\u0000${d.event.event}`;
  const firstOfEvent = new Map<string, number>();
  deliveries.forEach((d, index) => {
    if (!firstOfEvent.has(keyOf(d))) firstOfEvent.set(keyOf(d), index);
  });
  // In key order: two commits in flight at once (Inbox) then take their row locks in the same
  // order, so a retried delivery in both cannot deadlock them.
  const candidates = [...firstOfEvent.entries()]
    .sort(([a], [b]) => compareText(a, b))
    .map(([, index]) => deliveries[index]!);
  const upsert = reviewUpsertStatement(
    db,
    latestPerId(deliveries.map((d) => toReviewRow(d.event.data, d.observedAt))),
    'webhook',
  );
  // Both inserts run whole in the one statement (data-modifying CTEs always do); only the inbox's
  // new keys come back. Prepared: it runs for every few deliveries.
  const result = await preparedRaw(
    q,
    db,
    `with fresh as (
       insert into ?? (review_id, event, event_at, body)
       select * from unnest(?::uuid[], ?::text[], ?::timestamptz[], ?::text[])
       on conflict (review_id, event) do nothing
       returning review_id, event),
     upserted as (${upsert.sql})
     select review_id, event from fresh`,
    [
      db.table('webhook_inbox'),
      arrayLiteral(candidates.map((d) => d.event.data.id)),
      arrayLiteral(candidates.map((d) => d.event.event)),
      arrayLiteral(candidates.map((d) => d.observedAt.toISOString())),
      arrayLiteral(candidates.map((d) => d.body)),
      ...upsert.bindings,
    ] as Knex.RawBinding[],
  );
  const fresh = new Set(
    (result.rows as Array<{ review_id: string; event: string }>).map((r) => `${r.review_id}\u0000${r.event}`),
  );
  return deliveries.map((d, index) =>
    firstOfEvent.get(keyOf(d)) === index && fresh.has(keyOf(d)) ? 'accepted' : 'duplicate',
  );
}

/** A stored delivery, as `webhooks replay` reads it back. */
export interface InboxRow {
  readonly id: string;
  readonly review_id: string;
  readonly event_at: Date;
  readonly body: string;
}

/** Which stored deliveries to replay: one review's, or those received since a time; none: all. */
export interface InboxFilter {
  readonly reviewId?: string | undefined;
  readonly since?: Date | undefined;
}

/** The next `limit` stored deliveries after inbox row `afterId`, in the order they arrived. */
export async function readInboxPage(
  q: Queryable,
  db: Tables,
  filter: InboxFilter,
  afterId: string,
  limit: number,
): Promise<InboxRow[]> {
  const query = q(db.table('webhook_inbox'))
    .select('id', 'review_id', 'event_at', 'body')
    .where('id', '>', afterId)
    .orderBy('id')
    .limit(limit);
  if (filter.reviewId !== undefined) query.where({ review_id: filter.reviewId });
  if (filter.since !== undefined) query.where('received_at', '>=', filter.since);
  return query;
}
