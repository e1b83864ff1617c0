import { z } from 'zod';
import type { Review } from './reviewsSchema.js';

/**
 * A review in the form the spec shows (2.1) and the platform sends almost always: every field
 * present, ids in lower case, the timestamp in UTC (`Z`). Such a review is read here, by hand, at
 * about a fifth of what reviewSchema costs per record: on a backfill that is a tenth of the
 * client's CPU, spent on the path every review takes. Anything else (a field absent or of
 * another type, an id in upper case, an offset, a value out of range) is left to reviewSchema,
 * which decides and explains. So this is a subset of reviewSchema, never a second opinion: what
 * it returns is what reviewSchema would, checked field by field against it in
 * test/partner-api/canonicalReview.test.ts.
 */
export function canonicalReview(raw: unknown): Review | undefined {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return undefined;
  const r = raw as Record<string, unknown>;
  const { id, review_number, created_at, rating, comment, is_verified } = r;
  if (typeof id !== 'string' || !LOWER_CASE_UUID.test(id)) return undefined;
  if (typeof review_number !== 'string' || review_number.length < 1 || review_number.length > 500)
    return undefined;
  if (!isUtcTimestamp(created_at)) return undefined;
  // NaN and the infinities fail both comparisons, as reviewSchema refuses them.
  if (typeof rating !== 'number' || !(rating >= 0 && rating <= 5)) return undefined;
  if (!isTextOrNull(comment) || typeof is_verified !== 'boolean') return undefined;
  const reviewer = canonicalReviewer(r.reviewer);
  const professional = canonicalProfessional(r.professional);
  if (reviewer === undefined || professional === undefined) return undefined;
  return { id, review_number, created_at, rating, comment, is_verified, reviewer, professional };
}

/** uuidText's format, in the lower case it returns: any other case is left to it. */
const LOWER_CASE_UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** zod's own ISO 8601 format (isoTimestamp's check), so that the two cannot disagree on a date. */
const ISO_DATETIME = z.regexes.datetime({ offset: true });

/**
 * A timestamp in `Z` that isoTimestamp takes as it is: no offset for it to rewrite, and a year
 * PostgreSQL stores (not 0000; with `Z` the offset is within its range).
 */
function isUtcTimestamp(value: unknown): value is string {
  return (
    typeof value === 'string' && value.endsWith('Z') && !value.startsWith('0000') && ISO_DATETIME.test(value)
  );
}

const isTextOrNull = (value: unknown): value is string | null => value === null || typeof value === 'string';

/** `reviewer`, null or with both fields present; undefined for any other form. */
function canonicalReviewer(value: unknown): Review['reviewer'] {
  if (value === null) return null;
  if (typeof value !== 'object' || Array.isArray(value)) return undefined;
  const { name, email } = value as Record<string, unknown>;
  return isTextOrNull(name) && isTextOrNull(email) ? { name, email } : undefined;
}

/** `professional`, null or with both fields present; undefined for any other form. */
function canonicalProfessional(value: unknown): Review['professional'] {
  if (value === null) return null;
  if (typeof value !== 'object' || Array.isArray(value)) return undefined;
  const { id, name } = value as Record<string, unknown>;
  const idOk = id === null || (typeof id === 'string' && LOWER_CASE_UUID.test(id));
  return idOk && isTextOrNull(name) ? { id, name } : undefined;
}
