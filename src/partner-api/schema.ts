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

// Address lines are strings per spec 2.2, but an unset line may reasonably come back null or absent.
const addressLine = z
  .string()
  .nullish()
  .transform((v) => v ?? null);

export const locationSchema = z.object({
  id: z.number().int(),
  slug: z.string().min(1),
  name: z.string(),
  active: z.boolean(),
  address: z.object({
    line1: addressLine,
    line2: addressLine,
    city: addressLine,
    state: addressLine,
    zip: addressLine,
  }),
  profile_url: z.string().min(1),
  default_survey_url: z.string().min(1).nullable(),
  created_at: isoTimestamp,
});
export type Location = z.infer<typeof locationSchema>;

export const locationPageSchema = z.object({
  locations: z.array(locationSchema),
  pagination: paginationSchema,
});
export type LocationPage = z.infer<typeof locationPageSchema>;

/** A professional as listed: spec 2.3 without `location_id`, which only the single read carries. */
export const professionalListItemSchema = z.object({
  id: z.uuid(),
  slug: z.string().min(1),
  first_name: z.string(),
  last_name: z.string(),
  active: z.boolean(),
  profile_url: z.string().min(1),
  default_survey_url: z.string().min(1).nullable(),
  created_at: isoTimestamp,
});
export type ProfessionalListItem = z.infer<typeof professionalListItemSchema>;

export const professionalSchema = professionalListItemSchema.extend({
  location_id: z.number().int().nullable(),
});
export type Professional = z.infer<typeof professionalSchema>;

export const professionalPageSchema = z.object({
  professionals: z.array(professionalListItemSchema),
  pagination: paginationSchema,
});
export type ProfessionalPage = z.infer<typeof professionalPageSchema>;

/** Error bodies (spec 7): the structure of `error` is not specified, so anything is accepted. */
export const errorBodySchema = z.object({ error: z.unknown() }).partial();
