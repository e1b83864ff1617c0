import { z } from 'zod';
import { canonicalReview } from './canonicalReview.js';
import { indexedText } from './indexedText.js';
import { pageRecords, paginationSchema } from './paginationSchema.js';
import { isoTimestamp } from './timestampSchema.js';
import { uuidText } from './uuidText.js';
import type { RecordSchema } from './validRecords.js';

/**
 * What the platform sends (spec 2.1, 4.3). Strict about what we store and lenient about extra
 * fields: a platform that adds a field must not stop the mirror. The spec's "string or null"
 * fields may also be absent, and the `reviewer` and `professional` objects null or absent (spec
 * 2.1 lists every field of the two as nullable, so a missing object says no more than its fields
 * all null): each is read as null where the review is stored (reviewRow.ts). `nullish`, not a
 * default: a default costs five times as much per review, on a backfill's hot path.
 */
export const reviewSchema = z.object({
  id: uuidText,
  review_number: indexedText,
  created_at: isoTimestamp,
  rating: z.number().min(0).max(5),
  comment: z.string().nullish(),
  is_verified: z.boolean(),
  reviewer: z.object({ name: z.string().nullish(), email: z.string().nullish() }).nullish(),
  professional: z.object({ id: uuidText.nullish(), name: z.string().nullish() }).nullish(),
});
export type Review = z.infer<typeof reviewSchema>;

/**
 * How the feed's reviews are read: by canonicalReview, when a review has the spec's form, and by
 * reviewSchema otherwise, which the first answers for (see canonicalReview.ts).
 */
export const reviewRecord: RecordSchema<Review> = {
  safeParse(raw) {
    const review = canonicalReview(raw);
    return review === undefined ? reviewSchema.safeParse(raw) : { success: true, data: review };
  },
};

// Each review is checked on its own (validRecords.ts): one bad record is quarantined, not fatal.
export const reviewPageSchema = z.object({ reviews: pageRecords, pagination: paginationSchema });
