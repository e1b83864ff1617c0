import {
  ApiAuthError,
  ApiRequestError,
  ApiUnavailableError,
  EventBodyError,
} from '../../partner-api/errors.js';
import { backoffDelayMs } from '../../partner-api/retryPolicy.js';
import type { RecordedDecision } from './outboxSql.js';

/** What to do with a request whose outcome is unknown: send again (and count it), or park it. */
export const UNKNOWN_OUTCOME_POLICIES = ['retry', 'park'] as const;
export type UnknownOutcomePolicy = (typeof UNKNOWN_OUTCOME_POLICIES)[number];

export interface SendPolicy {
  readonly unknownOutcome: UnknownOutcomePolicy;
  /**
   * Sends that may have reached the platform after which an event whose outcome is unknown is
   * failed for good (flagged a possible duplicate) instead of sent again. Attempts proven not sent
   * are not counted: they reached no one, and an outage of any length must not use up the one
   * resend an unknown outcome gets. Under `retry` an event is sent at most twice anyway, so only 1
   * (no resend) differs from any larger budget.
   */
  readonly maxAttempts: number;
  readonly baseDelayMs: number;
  readonly maxDelayMs: number;
  /**
   * Cap of the wait after an attempt proven not sent (a 503, a 429, no connection): such an event
   * is never failed by its attempt count, so the wait keeps doubling up to this (default
   * NOT_SENT_MAX_DELAY_MS) instead of hammering a platform that is down for long.
   */
  readonly notSentMaxDelayMs?: number | undefined;
}

/**
 * Five minutes: past a few attempts an event the platform did not take waits, on average, half of
 * this (full jitter), so a backlog of 10,000 events during an outage of hours costs the platform
 * about 70 requests a second at most (less under EVENTS_RATE_PER_SECOND), not hundreds; and once
 * the platform is back, every waiting event is sent within five minutes.
 */
export const NOT_SENT_MAX_DELAY_MS = 5 * 60_000;

/**
 * The longest `Retry-After` an event waits out: an hour. The header is the platform's text, and a
 * value of years would put `next_attempt_at` past what a timestamp holds (the outcome's write
 * would fail) or leave the event waiting for good; an hour later it is simply asked again.
 */
export const MAX_RETRY_AFTER_MS = 60 * 60_000;

/** How one attempt ended, as far as the outbox cares. */
export type AttemptResult =
  | { readonly kind: 'accepted'; readonly id: string | null; readonly status: string | null }
  /** The platform refused the event itself (4xx): sending it again cannot help. */
  | { readonly kind: 'refused'; readonly error: string }
  /** Not processed (503, 429, 408, 409, no connection): safe to send again. */
  | { readonly kind: 'unavailable'; readonly error: string; readonly retryAfterMs?: number | undefined }
  /** Sent, but no complete answer came back: the platform may have it. */
  | { readonly kind: 'unknown'; readonly error: string }
  /** The API key was refused: nothing is sent until an operator acts; the event stays as it was. */
  | { readonly kind: 'unauthorized'; readonly error: string }
  /**
   * The route is not served where the request went, so the platform did nothing: a 3xx (the
   * client follows no redirect: an http:// base URL redirected to https://, a moved host), or a
   * 405 (the method is not taken there: a gateway that does not route it, a base URL pointing at
   * another service). No event or contact can cause one. As with a refused key, nothing is sent
   * until an operator fixes it.
   */
  | { readonly kind: 'misrouted'; readonly error: string };

export type OutboxDecision =
  | { readonly state: 'sent'; readonly id: string | null; readonly status: string | null }
  | {
      readonly state: 'failed';
      readonly error: string;
      /** The platform may have it (an unknown outcome on the last attempt): an operator's retry must know. */
      readonly possibleDuplicate?: boolean;
    }
  | { readonly state: 'parked'; readonly error: string }
  | {
      readonly state: 'pending';
      readonly delayMs: number;
      readonly error: string;
      /** The next send may duplicate an earlier one the platform did receive. */
      readonly possibleDuplicate: boolean;
      /** Not counted as an attempt (the key was refused, nothing was sent). */
      readonly refund: boolean;
    };

/**
 * Why a send was cut off: the replica's claim on the event was about to run out, and past it
 * another replica may take the event back and send it too. The sender aborts the request with it.
 */
export class ClaimDeadlineError extends Error {
  override readonly name = 'ClaimDeadlineError';
  /**
   * @param started false when the claim had no time left for a request before it was made: the
   * sender never called the client, so nothing can have reached the platform.
   */
  constructor(
    route: string,
    readonly started = true,
  ) {
    super(
      started
        ? `${route} was cut off before this replica's claim on the event ran out`
        : `${route} was not made: this replica's claim on the event was about to run out`,
    );
  }
}

/**
 * Whether the failure proves the request never left this process, so the platform cannot have
 * it: the body could not be written (EventBodyError), or the client failed with no answer (no
 * status) and found, when it built the error, that nothing had been sent. Anything else that came
 * without an answer may have reached the platform: in doubt, not proven.
 */
export function provenNotSent(error: unknown): boolean {
  if (error instanceof EventBodyError) return true;
  if (error instanceof ClaimDeadlineError) return !error.started;
  // The client's `outcomeUnknown` is failedBeforeSending's verdict on the cause it caught: asking
  // it again here would be a second rule to keep in step, and would misread a body cut off after
  // the status (no status either, an answer all the same) whose cause happened to bear such a code.
  return error instanceof ApiUnavailableError && error.status === undefined && !error.outcomeUnknown;
}

/** An event that cannot be sent as it was written (see unsendableReason): refused here, never sent. */
export class UnsendableEventError extends Error {
  override readonly name = 'UnsendableEventError';
}

/**
 * The error statuses that prove the platform did not act on the POST: a 503 (the platform, or its
 * load balancer, refuses work while it is down or overloaded) and a 429 (the rate limiter, in
 * front of the platform). Any other 5xx may come after the platform acted: a 500 thrown after the
 * event was stored (a campaign started, the answer failed), a 502 or 504 from a gateway that
 * forwarded the POST and lost or gave up on the answer (an HTML 502 from a proxy says nothing of
 * what the platform did). In doubt, unknown.
 */
const NOT_PROCESSED_STATUSES: ReadonlySet<number> = new Set([429, 503]);

/**
 * A 405 (Method Not Allowed) says the method is not served at that address at all, whatever the
 * body: the route is wrong, not the record, and a 4xx was not acted on. Not a 404: how the
 * platform answers an event for an email it has no contact for is not shown (spec 4.2, 7), and a
 * 404 may be that refusal of one event. Not a 501 either: a 5xx, in doubt an unknown outcome.
 */
const ROUTE_NOT_SERVED = 405;

/** Classifies what the API client threw. `describe` turns an error into its scrubbed text. */
export function attemptResultOf(error: unknown, describe: (e: unknown) => string): AttemptResult {
  // Failed before anything left this process (see provenNotSent): sent again later, as the
  // platform cannot have it, never parked nor counted as a possible duplicate.
  if (provenNotSent(error)) {
    return { kind: 'unavailable', error: `${describe(error)}: not sent (failed before the request left)` };
  }
  // The client throws the abort's reason itself when the request was in flight...
  if (error instanceof ClaimDeadlineError) {
    return { kind: 'unknown', error: `${error.message}: it may have reached the platform` };
  }
  // ...and an AbortError caused by it when it was waiting to send again. A POST is only sent again
  // after a 429 or a failed connection, neither of which the platform acted on.
  if (error instanceof Error && error.name === 'AbortError' && error.cause instanceof ClaimDeadlineError) {
    return {
      kind: 'unavailable',
      error: `${error.cause.message} while it waited to be sent again (a 429 or a failed connection): not sent`,
    };
  }
  // Refused before any request was made, as the platform would refuse it: failed for good.
  if (error instanceof UnsendableEventError) return { kind: 'refused', error: error.message };
  const text = describe(error);
  if (error instanceof ApiAuthError) return { kind: 'unauthorized', error: text };
  if (error instanceof ApiRequestError) {
    if (error.status === ROUTE_NOT_SERVED) {
      return {
        kind: 'misrouted',
        error: `${text} (the route is not served at REVIEWS_API_URL: nothing was processed; kept until it is, by REVIEWS_API_URL or the gateway in front)`,
      };
    }
    if (error.status >= 300 && error.status <= 399) {
      // The client's text says where it leads and that REVIEWS_API_URL is to be set to it.
      return { kind: 'misrouted', error: text };
    }
    // 408 and 409 are the platform's way of saying "not now", not "never": the platform did not
    // act on it, so sending it again is harmless.
    if (error.status === 408 || error.status === 409) return { kind: 'unavailable', error: text };
    // Any other 4xx refuses the event itself. A 403 included: the client throws one as an
    // ApiRequestError only once a check of the key passed (a refused key is an ApiAuthError,
    // above), so this event is forbidden (a person who opted out), not the key. Sent again it
    // would be refused again every few minutes for ever: failed, not flagged (the platform did
    // not act on it), for an operator's `events retry`.
    return { kind: 'refused', error: text };
  }
  if (error instanceof ApiUnavailableError) {
    if (error.outcomeUnknown || (error.status !== undefined && !NOT_PROCESSED_STATUSES.has(error.status))) {
      return { kind: 'unknown', error: text };
    }
    return { kind: 'unavailable', error: text, retryAfterMs: error.retryAfterMs };
  }
  // Anything else (a body that broke the contract on a 2xx, a bug): the request was answered with
  // success or may have been processed; treated as unknown, never silently as sent.
  return { kind: 'unknown', error: text };
}

/**
 * The next state of an event after an attempt (`attempts` counts it). `possibleDuplicate`: the row
 * was already flagged, so this attempt was itself a resend after an unknown outcome (or after a
 * lapsed claim): the platform may hold two copies already. Pure: the whole policy is tested
 * without a network or a database.
 */
export function decideAfterAttempt(
  result: AttemptResult,
  attempts: number,
  policy: SendPolicy,
  random: () => number,
  possibleDuplicate = false,
): OutboxDecision {
  const backoff = (maxDelayMs: number) =>
    backoffDelayMs(Math.max(0, attempts - 1), { ...policy, maxDelayMs, maxRetries: 0, budgetMs: 0 }, random);
  switch (result.kind) {
    case 'accepted':
      return { state: 'sent', id: result.id, status: result.status };
    case 'refused':
      return { state: 'failed', error: result.error };
    case 'unauthorized':
    case 'misrouted':
      return {
        state: 'pending',
        delayMs: policy.maxDelayMs,
        error: result.error,
        possibleDuplicate: false,
        refund: true,
      };
    case 'unknown':
      if (policy.unknownOutcome === 'park') {
        return { state: 'parked', error: `outcome unknown, parked for an operator: ${result.error}` };
      }
      // Sent once more after an unknown outcome, and unknown again: another send could make three
      // copies. The platform holds at most two; an operator decides.
      if (possibleDuplicate) {
        return {
          state: 'parked',
          error: `outcome unknown again after it was sent again following an unknown outcome (the platform may have it twice): parked for an operator, not sent a third time: ${result.error}`,
        };
      }
      // Not flagged, so no earlier send may have reached the platform (an unknown outcome or a
      // lapse flags the row, or parks it): this is the first, however many attempts the platform
      // never saw came before. With a budget of one it may have been delivered and is not sent
      // again: failed, and flagged, so an operator's retry knows.
      if (policy.maxAttempts <= 1) return { state: 'failed', error: result.error, possibleDuplicate: true };
      return {
        state: 'pending',
        delayMs: backoff(policy.maxDelayMs),
        error: result.error,
        possibleDuplicate: true,
        refund: false,
      };
    case 'unavailable':
      // The platform did not act on it and no person was reached: never failed by the attempt
      // count (an outage of any length would fail the whole backlog for good), only delayed, the
      // wait growing up to minutes; the platform's Retry-After, when it gave one, instead.
      return {
        state: 'pending',
        delayMs:
          result.retryAfterMs === undefined
            ? backoff(policy.notSentMaxDelayMs ?? NOT_SENT_MAX_DELAY_MS)
            : Math.min(result.retryAfterMs, MAX_RETRY_AFTER_MS),
        error: result.error,
        possibleDuplicate: false,
        refund: false,
      };
  }
}

/**
 * The most of the database's words a reduced outcome carries: enough for the constraint's or the
 * trigger's name and message, and short, since what the database refuses may be any long text.
 */
const REFUSAL_MAX_CHARS = 300;

/**
 * Why the database refused a write, for a row and a log line: its SQLSTATE and its own message
 * (`describe`: the sender's scrubbed describeError, which leaves out the failing row's values that
 * a check's detail prints), at most REFUSAL_MAX_CHARS long.
 */
export function refusalOf(error: unknown, describe: (e: unknown) => string): string {
  const code = (error as { code?: unknown } | null)?.code;
  const text = `${typeof code === 'string' ? `SQLSTATE ${code}, ` : ''}${describe(error)}`;
  return text.length <= REFUSAL_MAX_CHARS ? text : `${text.slice(0, REFUSAL_MAX_CHARS - 1)}…`;
}

/**
 * The same decision, as little of it as the row needs, for an outcome whose full write the
 * database refused (an operator's check or trigger, say, on the platform's id or error text). The
 * platform's answer is known, and an outcome not written leaves the row `sending`: its claim
 * lapses and the event is taken back as an unknown outcome, sent again to a person the platform
 * may already have reached. So the state is kept, with what decides the next send (when it is
 * due, the possible-duplicate flag, the refunded attempt), and the platform's words are dropped
 * for a short text of our own saying why (`refusal`, see refusalOf); the log has them.
 */
export function reducedDecision(decision: RecordedDecision, refusal: string): RecordedDecision {
  return {
    ...decision,
    error: `the platform's answer could not be stored in full, only its outcome (${decision.state}): the database refused it (${refusal})`,
    platformId: null,
    platformStatus: null,
  };
}
