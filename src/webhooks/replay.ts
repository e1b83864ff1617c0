import type { Db } from '../db/connect.js';
import { toReviewRow } from '../mirror/reviewRow.js';
import { upsertReviews } from '../mirror/reviewsSql.js';
import { parseEvent } from './event.js';
import { type InboxFilter, readInboxPage } from './inboxSql.js';

const PAGE = 500;

export interface ReplaySummary {
  events: number;
  inserted: number;
  updated: number;
  /** Stored bodies that no longer parse (kept by an older version): their inbox id and why. */
  unreadable: { id: string; reason: string }[];
}

/**
 * `webhooks replay`: applies stored deliveries again through the receiver's own upsert, with the
 * time each was observed. Idempotent: a version older than the mirror's changes nothing, so after
 * a restore from an older backup it brings back exactly what the deliveries had brought.
 */
export async function replayInbox(db: Db, filter: InboxFilter): Promise<ReplaySummary> {
  const summary: ReplaySummary = { events: 0, inserted: 0, updated: 0, unreadable: [] };
  let after = '0';
  for (;;) {
    const rows = await readInboxPage(db.knex, db, filter, after, PAGE);
    if (rows.length === 0) return summary;
    after = String(rows.at(-1)!.id);
    const reviews = [];
    for (const row of rows) {
      const parsed = parseEvent(Buffer.from(row.body, 'utf8'));
      if (parsed.ok) reviews.push(toReviewRow(parsed.event.data, row.event_at));
      else summary.unreadable.push({ id: String(row.id), reason: parsed.detail });
    }
    const counts = await upsertReviews(db.knex, db, reviews, 'webhook');
    summary.events += rows.length;
    summary.inserted += counts.inserted;
    summary.updated += counts.updated;
  }
}
