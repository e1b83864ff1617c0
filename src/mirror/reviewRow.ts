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
 * One row per id, the most recently observed version winning. Postgres refuses an upsert that
 * touches the same row twice, and a burst of deliveries can carry the same review twice.
 */
export function latestPerId(rows: readonly ReviewRow[]): ReviewRow[] {
  const byId = new Map<string, ReviewRow>();
  for (const row of rows) {
    const seen = byId.get(row.id);
    if (!seen || row.observed_at.getTime() >= seen.observed_at.getTime()) byId.set(row.id, row);
  }
  return [...byId.values()];
}
