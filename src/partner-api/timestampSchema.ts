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

/**
 * Timestamps of every resource (spec 2): ISO 8601 with an offset, and storable. One that passed
 * the format yet that the database refuses would fail its whole group of pages on every run, so
 * it is refused here and quarantined alone, like any other invalid record.
 */
export const isoTimestamp = z.iso
  .datetime({ offset: true, message: 'must be an ISO 8601 timestamp', abort: true })
  .refine(storableInPostgres, {
    message: 'must be a timestamp PostgreSQL can store (year 0001 or later, UTC offset within ±15:59)',
  });
