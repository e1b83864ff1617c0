import { z } from 'zod';

/**
 * zod schemas of what the platform sends (spec section 2), beside the client that receives it.
 * Parsing is strict about what we store and lenient about extra fields: a platform that adds a
 * field must not stop the mirror.
 */

const isoTimestamp = z.iso.datetime({ offset: true, message: 'must be an ISO 8601 timestamp' });

export const reviewSchema = z.object({
  id: z.uuid(),
  review_number: z.string().min(1),
  created_at: isoTimestamp,
  rating: z.number().min(0).max(5),
  comment: z.string().nullable(),
  is_verified: z.boolean(),
  reviewer: z.object({ name: z.string().nullable(), email: z.string().nullable() }),
  professional: z.object({ id: z.uuid().nullable(), name: z.string().nullable() }).nullable(),
});
export type Review = z.infer<typeof reviewSchema>;

export const paginationSchema = z.object({
  count: z.number().int().nonnegative(),
  has_more: z.boolean(),
  next_cursor: z.string().min(1).nullable(),
});
export type Pagination = z.infer<typeof paginationSchema>;

export const reviewPageSchema = z.object({ reviews: z.array(reviewSchema), pagination: paginationSchema });
export type ReviewPage = z.infer<typeof reviewPageSchema>;
