import { z } from 'zod';
import { indexedText } from './indexedText.js';
import { paginationSchema } from './paginationSchema.js';
import { isoTimestamp } from './timestampSchema.js';
import { uuidText } from './uuidText.js';

/**
 * What the platform sends (spec 2.1, 4.3). Strict about what we store and lenient about extra
 * fields: a platform that adds a field must not stop the mirror.
 */
export const reviewSchema = z.object({
  id: uuidText,
  review_number: indexedText,
  created_at: isoTimestamp,
  rating: z.number().min(0).max(5),
  comment: z.string().nullable(),
  is_verified: z.boolean(),
  reviewer: z.object({ name: z.string().nullable(), email: z.string().nullable() }),
  professional: z.object({ id: uuidText.nullable(), name: z.string().nullable() }).nullable(),
});
export type Review = z.infer<typeof reviewSchema>;

// Each review is checked on its own (validRecords.ts): one bad record is quarantined, not fatal.
export const reviewPageSchema = z.object({ reviews: z.array(z.unknown()), pagination: paginationSchema });
