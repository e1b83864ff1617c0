import { z } from 'zod';
import { slugText } from './indexedText.js';
import { pageRecords, paginationSchema } from './paginationSchema.js';
import { isoTimestamp } from './timestampSchema.js';

// Address lines are strings per spec 2.2, but an unset line may reasonably come back null or absent.
const addressLine = z
  .string()
  .nullish()
  .transform((v) => v ?? null);

/** A location (spec 2.2); extra fields are ignored. */
export const locationSchema = z.object({
  // The mirror's column is a 32-bit integer, as the spec's examples are.
  id: z.int32(),
  slug: slugText,
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

// Each location is checked on its own (validRecords.ts): one bad record is quarantined, not fatal.
export const locationPageSchema = z.object({ locations: pageRecords, pagination: paginationSchema });
