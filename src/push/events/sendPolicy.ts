import { ApiAuthError, ApiRequestError, ApiUnavailableError } from '../../partner-api/errors.js';
import { backoffDelayMs } from '../../partner-api/retryPolicy.js';

/** What to do with a request whose outcome is unknown: send again (and count it), or park it. */
export const UNKNOWN_OUTCOME_POLICIES = ['retry', 'park'] as const;
export type UnknownOutcomePolicy = (typeof UNKNOWN_OUTCOME_POLICIES)[number];

export interface SendPolicy {
  readonly unknownOutcome: UnknownOutcomePolicy;
  /** Attempts after which a failing event is failed for good. */
  readonly maxAttempts: number;
  readonly baseDelayMs: number;
  readonly maxDelayMs: number;
}

/** How one attempt ended, as far as the outbox cares. */
export type AttemptResult =
  | { readonly kind: 'accepted'; readonly id: string | null; readonly status: string | null }
  /** The platform refused the event itself (4xx): sending it again cannot help. */
  | { readonly kind: 'refused'; readonly error: string }
  /** Not processed (5xx, 429, no connection): safe to send again. */
  | { readonly kind: 'unavailable'; readonly error: string; readonly retryAfterMs?: number | undefined }
  /** Sent, but no complete answer came back: the platform may have it. */
  | { readonly kind: 'unknown'; readonly error: string }
  /** The API key was refused: nothing is sent until an operator acts; the event stays as it was. */
  | { readonly kind: 'unauthorized'; readonly error: string };

export type OutboxDecision =
  | { readonly state: 'sent'; readonly id: string | null; readonly status: string | null }
  | { readonly state: 'failed'; readonly error: string }
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

/** Classifies what the API client threw. `describe` turns an error into its scrubbed text. */
export function attemptResultOf(error: unknown, describe: (e: unknown) => string): AttemptResult {
  const text = describe(error);
  if (error instanceof ApiAuthError) return { kind: 'unauthorized', error: text };
  if (error instanceof ApiRequestError) {
    // 408 and 409 are the platform's way of saying "not now", not "never".
    if (error.status === 408 || error.status === 409) return { kind: 'unavailable', error: text };
    return { kind: 'refused', error: text };
  }
  if (error instanceof ApiUnavailableError) {
    return error.outcomeUnknown ? { kind: 'unknown', error: text } : { kind: 'unavailable', error: text };
  }
  // Anything else (a body that broke the contract on a 2xx, a bug): the request was answered with
  // success or may have been processed; treated as unknown, never silently as sent.
  return { kind: 'unknown', error: text };
}

/**
 * The next state of an event after an attempt (`attempts` counts it). Pure: the whole policy is
 * tested without a network or a database.
 */
export function decideAfterAttempt(
  result: AttemptResult,
  attempts: number,
  policy: SendPolicy,
  random: () => number,
): OutboxDecision {
  const backoff = (retryAfterMs?: number) =>
    retryAfterMs ??
    backoffDelayMs(Math.max(0, attempts - 1), { ...policy, maxRetries: 0, budgetMs: 0 }, random);
  switch (result.kind) {
    case 'accepted':
      return { state: 'sent', id: result.id, status: result.status };
    case 'refused':
      return { state: 'failed', error: result.error };
    case 'unauthorized':
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
      if (attempts >= policy.maxAttempts) return { state: 'failed', error: result.error };
      return {
        state: 'pending',
        delayMs: backoff(),
        error: result.error,
        possibleDuplicate: true,
        refund: false,
      };
    case 'unavailable':
      if (attempts >= policy.maxAttempts) return { state: 'failed', error: result.error };
      return {
        state: 'pending',
        delayMs: backoff(result.retryAfterMs),
        error: result.error,
        possibleDuplicate: false,
        refund: false,
      };
  }
}
