import { storableText } from '../db/storableText.js';
import type { Review } from '../partner-api/reviewsSchema.js';

/** A review as stored: spec 2.1 flattened, plus when the platform produced this version of it. */
export interface ReviewRow {
  id: string;
  review_number: string;
  created_at: string;
  rating: number;
  comment: string | null;
  is_verified: boolean;
  reviewer_name: string | null;
  reviewer_email: string | null;
  professional_id: string | null;
  professional_name: string | null;
  observed_at: Date;
}

export function toReviewRow(review: Review, observedAt: Date): ReviewRow {
  return {
    id: review.id,
    review_number: storableText(review.review_number),
    created_at: review.created_at,
    rating: review.rating,
    comment: storableText(review.comment ?? null),
    is_verified: review.is_verified,
    // Absent as null: the feed's nullable fields and objects may be left out (reviewsSchema.ts).
    reviewer_name: storableText(review.reviewer?.name ?? null),
    reviewer_email: storableText(review.reviewer?.email ?? null),
    professional_id: review.professional?.id ?? null,
    professional_name: storableText(review.professional?.name ?? null),
    observed_at: observedAt,
  };
}

/**
 * One row per id, the most recently observed version winning, in id order. Postgres refuses an
 * upsert that touches the same row twice, and a burst of deliveries can carry the same review
 * twice. In id order, every upsert of reviews (a poll's page, newest first; a webhook commit) takes
 * its row locks in one order: a poll and a webhook commit writing the same reviews at once wait
 * for each other instead of deadlocking, which PostgreSQL ends after a second by failing one.
 */
export function latestPerId(rows: readonly ReviewRow[]): ReviewRow[] {
  const byId = new Map<string, ReviewRow>();
  for (const row of rows) {
    const seen = byId.get(row.id);
    if (!seen || row.observed_at.getTime() >= seen.observed_at.getTime()) byId.set(row.id, row);
  }
  return [...byId.values()].sort((a, b) => compareText(a.id, b.id));
}

/** Code-unit order: one order of keys for every statement that locks rows by them. */
export function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
