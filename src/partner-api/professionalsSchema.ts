import { z } from 'zod';
import { slugText } from './indexedText.js';
import { pageRecords, paginationSchema } from './paginationSchema.js';
import { isoTimestamp } from './timestampSchema.js';
import { uuidText } from './uuidText.js';

/** A professional as listed: spec 2.3 without `location_id`, which only the single read carries. */
export const professionalListItemSchema = z.object({
  id: uuidText,
  slug: slugText,
  first_name: z.string(),
  last_name: z.string(),
  active: z.boolean(),
  profile_url: z.string().min(1),
  default_survey_url: z.string().min(1).nullable(),
  created_at: isoTimestamp,
});
export type ProfessionalListItem = z.infer<typeof professionalListItemSchema>;

export const professionalSchema = professionalListItemSchema.extend({
  location_id: z.int32().nullable(),
});
export type Professional = z.infer<typeof professionalSchema>;

// Each professional is checked on its own (validRecords.ts): one bad record is quarantined, not fatal.
export const professionalPageSchema = z.object({
  professionals: pageRecords,
  pagination: paginationSchema,
});
