import type { z } from 'zod';
import { ApiSchemaError } from './errors.js';
import { formatPath } from './http.js';

/** A record of a page that failed its schema: kept as the platform sent it, with the reason. */
export interface RejectedRecord {
  readonly raw: unknown;
  /** `rating: Too big: expected number to be <=5`: the first offending field and why. */
  readonly reason: string;
}

/**
 * What a page's records are read with: a zod schema, or one with a fast path before it (as
 * reviewRecord), which answers as the schema would.
 */
export interface RecordSchema<T> {
  safeParse(raw: unknown): z.ZodSafeParseResult<T>;
}

/** A record `schema` rejected, with the first offending field and why. */
export function rejection(raw: unknown, error: z.ZodError): RejectedRecord {
  const issue = error.issues[0]!;
  return { raw, reason: `${formatPath(issue.path)}: ${issue.message}` };
}

/**
 * One bad record must not fail its page (a resumable walk would stop on it for ever), but a page
 * where most records fail is not bad data: the platform changed its schema, and quarantining
 * everything would empty the mirror quietly. More than half of a full page (the page size asked
 * for), and at least this many records, stops the walk loudly instead. Half of a full page, not
 * of the page: a short last page, or the few new reviews of a poll, holding two bad records
 * would otherwise stop every walk that reads it, for ever.
 */
export const SCHEMA_CHANGE_MIN_RECORDS = 2;

/**
 * Splits a page's records into those its schema accepts and those it rejects. Throws
 * ApiSchemaError when most of a full page of `limit` records is rejected (see
 * SCHEMA_CHANGE_MIN_RECORDS).
 */
export function splitValid<T>(
  records: readonly unknown[],
  schema: RecordSchema<T>,
  where: { route: string; status: number; field: string },
  limit: number,
): { valid: T[]; rejected: RejectedRecord[] } {
  const valid: T[] = [];
  const rejected: RejectedRecord[] = [];
  for (const raw of records) {
    const parsed = schema.safeParse(raw);
    if (parsed.success) {
      valid.push(parsed.data);
      continue;
    }
    rejected.push(rejection(raw, parsed.error));
  }
  if (rejected.length >= SCHEMA_CHANGE_MIN_RECORDS && rejected.length * 2 > limit) {
    const first = rejected[0]!;
    throw new ApiSchemaError(
      `${where.field} (${rejected.length} of ${records.length} records)`,
      `${first.reason} — most of the page fails the schema: the platform's format changed`,
      { route: where.route, status: where.status },
    );
  }
  return { valid, rejected };
}
