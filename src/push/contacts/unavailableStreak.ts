import { ApiRequestError, ApiUnavailableError } from '../../partner-api/errors.js';
import { type AttemptResult, attemptResultOf } from '../events/sendPolicy.js';

/**
 * Pushes in a row after which a contact the platform keeps failing, while it still answers, is
 * given up: a record it chokes on. Three polls of the inbox tell such a record from a passing
 * hiccup; more would only keep the export, and the alert on the inbox job, for longer.
 */
export const GIVE_UP_AFTER_PUSHES = 3;

/**
 * How long a streak must have lasted before a contact is given up on the probe alone, when
 * failures beside it in the push look like an outage of the contacts route (see pushContacts):
 * past it, an export is not held in processing/, and every export after it with it, any longer.
 */
export const GIVE_UP_AFTER_MS = 60 * 60 * 1000;

/** Pushes in a row of one content that the platform failed without refusing it. */
export interface UnavailableStreak {
  /**
   * GIVE_UP_AFTER_PUSHES or more only once given up: a contact not given up at its limit (the
   * platform did not answer the probe) is recorded one push short of it.
   */
  readonly pushes: number;
  /** When the first of them started (database time); null when there is none. */
  readonly since: Date | null;
}

export const NO_STREAK: UnavailableStreak = { pushes: 0, since: null };

/** Whether a contact stored with this outcome and streak was given up (see `pushes`). */
export const isGivenUp = (outcome: string | null, streak: UnavailableStreak): boolean =>
  outcome === 'failed' && streak.pushes >= GIVE_UP_AFTER_PUSHES;

/** A streak that reached the limit but was not given up: kept one push short of it. */
export const heldShortOfLimit = (streak: UnavailableStreak): UnavailableStreak =>
  streak.pushes < GIVE_UP_AFTER_PUSHES ? streak : { ...streak, pushes: GIVE_UP_AFTER_PUSHES - 1 };

/**
 * What the client threw, as the contacts push takes it. The outbox's policy (attemptResultOf)
 * with one difference: a contact is an upsert of its own content, so a 409 (a conflict with
 * another contact: an email taken by another external_id) is the platform refusing that content,
 * as a 422 or a 403 the key passed a check on (an opted-out person) is, not "not now". It fails the
 * contact with the platform's text, and a later export with it sends it again; counted as
 * unavailable, one such record held its export, and every export after it, for ever. A 408 stays
 * a request the platform did not process in time.
 */
export function contactAttemptResultOf(error: unknown, describe: (e: unknown) => string): AttemptResult {
  if (error instanceof ApiRequestError && error.status === 409)
    return { kind: 'refused', error: describe(error) };
  return attemptResultOf(error, describe);
}

/** A wait the platform asked for that every contact sent before its end would meet too. */
export interface RetryAfterStop {
  /** The answer that asked for it: 429, or a 503 (any status the client counts unavailable). */
  readonly status: number;
  readonly retryAfterMs: number;
}

/**
 * The wait the whole push must keep to after this failure of a contact; undefined when the failure
 * is the contact's own to count. A 429 with a wait the client's retries did not get through (its
 * `Retry-After` outlasted them, or the platform kept answering 429 through every one): the limit
 * is on the caller, not on the contact. Any other unavailable answer (a 503) only when its
 * `Retry-After` outlasted the retries: the client gave up at once, and would for every contact
 * after it. One the retries waited out, the platform still failing the contact, counts against
 * that contact, as one without a wait does.
 */
export function retryAfterStopOf(error: unknown): RetryAfterStop | undefined {
  if (!(error instanceof ApiUnavailableError) || error.status === undefined) return undefined;
  const retryAfterMs = error.retryAfterMs ?? 0;
  if (retryAfterMs <= 0) return undefined;
  if (error.status !== 429 && !error.retryAfterOutlastsRetries) return undefined;
  return { status: error.status, retryAfterMs };
}

/**
 * The streak after this push's failure of a contact. A refusal ends it (the contact is failed for
 * its own reason). A 429 or a connection that could not be made says nothing of the contact (the
 * platform never looked at it), so the streak stays as it was. A 5xx, a 408 or a request left
 * without a usable answer counts against the contact.
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
  return `the platform ${how} on ${streak.pushes} pushes in a row while it answered otherwise (the last: ${last}); given up until an export changes the contact, or a full push (contacts push --full)`;
}

/** The error of a given-up contact an export holds unchanged: not sent, failed as it was. */
export function stillGivenUpError(lastError: string | null): string {
  return `not sent: given up on an earlier push, and unchanged since (${lastError ?? 'no error recorded'})`;
}
