import { ApiRequestError, ApiUnavailableError } from '../../partner-api/errors.js';
import type { AttemptResult } from '../events/sendPolicy.js';

/**
 * Pushes in a row after which a contact the platform keeps failing, while it takes the others,
 * is failed for good: a record it chokes on. Three polls of the inbox tell such a record from a
 * passing hiccup; more would only keep the export, and the alert on the inbox job, for longer.
 */
export const GIVE_UP_AFTER_PUSHES = 3;

/** Pushes in a row of one content that the platform failed without refusing it. */
export interface UnavailableStreak {
  readonly pushes: number;
  /** When the first of them started (database time); null when there is none. */
  readonly since: Date | null;
}

export const NO_STREAK: UnavailableStreak = { pushes: 0, since: null };

/**
 * The streak after this push's failure of a contact. A refusal ends it (the contact is failed for
 * its own reason). A 429 or a connection that could not be made says nothing of the contact (the
 * platform never looked at it), so the streak stays as it was. A 5xx or a request left without an
 * answer counts against the contact.
 */
export function streakAfterFailure(
  prior: UnavailableStreak,
  result: AttemptResult,
  error: unknown,
  pushStartedAt: Date,
): UnavailableStreak {
  if (result.kind === 'refused') return NO_STREAK;
  if (result.kind !== 'unavailable' && result.kind !== 'unknown') return prior;
  if (error instanceof ApiUnavailableError && !error.outcomeUnknown) {
    if (error.status === 429 || error.status === undefined) return prior;
  }
  return { pushes: prior.pushes + 1, since: prior.since ?? pushStartedAt };
}

/** The error of a contact given up: how often, and how it was failed the last time. */
export function givenUpError(streak: UnavailableStreak, error: unknown, last: string): string {
  const status =
    error instanceof ApiUnavailableError || error instanceof ApiRequestError ? error.status : undefined;
  const how =
    status === undefined ? 'gave no usable answer' : status >= 500 ? 'answered 5xx' : `answered ${status}`;
  return `the platform ${how} on ${streak.pushes} pushes in a row while it took other contacts (the last: ${last}); failed until a later export sends it again`;
}
