import { InvalidArgumentError } from 'commander';
import { calendarDateExists } from '../calendarDate.js';

/** An ISO 8601 time with a date (and, if a time is given, its zone), for --since and --until. */
export function timeOption(value: string): Date {
  const ms = Date.parse(value);
  const zoned = /^\d{4}-\d{2}-\d{2}$/.test(value) || /T.*(Z|[+-]\d{2}:?\d{2})$/i.test(value);
  if (!calendarDateExists(value) || Number.isNaN(ms) || !zoned) {
    throw new InvalidArgumentError(
      'must be an ISO 8601 time with its zone, on a date that exists, e.g. 2026-11-01T00:00:00Z or 2026-11-01',
    );
  }
  return new Date(ms);
}
