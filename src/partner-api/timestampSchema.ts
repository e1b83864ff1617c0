import { z } from 'zod';

/**
 * Whether PostgreSQL's timestamptz holds an ISO 8601 timestamp: it refuses year zero (ISO's
 * 1 BC) and UTC offsets of 16 hours or more. The format check before this one, which stops at a
 * failure, has fixed the shape: the offset, when not `Z`, is the last six characters, `±HH:MM`.
 */
function storableInPostgres(value: string): boolean {
  if (value.startsWith('0000')) return false;
  return value.endsWith('Z') || Number(value.slice(-5, -3)) <= 15;
}

/** The minutes of an offset in ISO 8601's basic form (`+0000`) or of hours alone (`+00`): absent or 2 digits. */
const SHORT_OFFSET_MINUTES = /(?<=T[\d:.]+[+-]\d\d)(\d\d)?$/;

/**
 * `value` with its UTC offset in the extended form `±HH:MM`, the one zod's check takes and every
 * reader of a record's `created_at` reads: V8's `Date.parse` (the watermark's newestCreatedAt, a
 * backfill's `until`) takes `+0000` only by its legacy fallback, and `+00` not at all (NaN). The
 * spec says only "ISO 8601 timestamp", and the basic form (PHP's DATE_ISO8601) is one. A timestamp
 * in `Z`, the common form, is passed as it is.
 */
function extendedOffset(value: unknown): unknown {
  if (typeof value !== 'string' || value.endsWith('Z')) return value;
  return value.replace(SHORT_OFFSET_MINUTES, (minutes) => `:${minutes || '00'}`);
}

/**
 * Timestamps of every resource (spec 2): ISO 8601 with an offset, and storable. One that passed
 * the format yet that the database refuses would fail its whole group of pages on every run, so
 * it is refused here and quarantined alone, like any other invalid record. The output's offset is
 * `Z` or `±HH:MM`, whichever of ISO 8601's forms was sent.
 */
export const isoTimestamp = z.preprocess(
  extendedOffset,
  z.iso
    .datetime({ offset: true, message: 'must be an ISO 8601 timestamp', abort: true })
    .refine(storableInPostgres, {
      message: 'must be a timestamp PostgreSQL can store (year 0001 or later, UTC offset within ±15:59)',
    }),
);
