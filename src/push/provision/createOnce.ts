import { setTimeout as sleep } from 'node:timers/promises';
import { describeError } from '../../errors.js';
import { ApiAuthError, ApiRequestError } from '../../partner-api/errors.js';
import { NO_ERROR_TEXT } from '../../partner-api/http.js';
import { nextRetryDelayMs, type RetryPolicy } from '../../partner-api/retryPolicy.js';

export type CreateOutcome<T> =
  | { readonly record: T; readonly created: boolean }
  | { readonly error: string; readonly status?: number };

export interface CreateOnceOptions {
  /**
   * The platform client's retry policy (`API_MAX_RETRIES`, `API_RETRY_BUDGET_SECONDS`, its
   * backoff): the transport never re-sends a POST, so the creates are retried here, under the
   * same bounds as every other request.
   */
  readonly retry: RetryPolicy;
  readonly signal?: AbortSignal | undefined;
  readonly random?: () => number;
}

/**
 * The key was refused after a create whose answer was lost: the run must stop, and the record may
 * exist (the lost create may have landed), so it is neither created nor failed.
 */
export class CreateUncertainError extends Error {
  constructor(
    lost: unknown,
    readonly refusal: ApiAuthError,
  ) {
    super(
      `the create's answer was lost (${describeError(lost)}), then the key was refused: ${refusal.message}`,
    );
    this.name = 'CreateUncertainError';
  }
}

/**
 * Reads `slug` back: the record, or undefined on 404. Other failures throw (the transport has
 * already retried the GET), and then nobody can tell whether the record exists.
 */
export async function readIfExists<T>(read: () => Promise<T>): Promise<T | undefined> {
  try {
    return await read();
  } catch (error) {
    if (error instanceof ApiRequestError && error.status === 404) return undefined;
    throw error;
  }
}

/**
 * Creates a record once, by its slug. A POST whose answer was lost (a timeout, a 5xx, a body cut
 * short) is never sent blindly again: the slug is read back first, and only a record not found
 * is asked for again, after the client's backoff and within its retry count and time budget. The
 * platform keeps slugs (and professionals' emails) unique, so a request that landed late is
 * refused, not doubled; a refusal that follows a lost answer is checked against the slug once
 * more, since it may be our own earlier request.
 */
export async function createOnce<T>(
  create: () => Promise<T>,
  readBack: () => Promise<T | undefined>,
  options: CreateOnceOptions,
): Promise<CreateOutcome<T>> {
  const startedAt = performance.now();
  let uncertain: unknown;
  for (let retries = 0; ; retries++) {
    try {
      return { record: await create(), created: true };
    } catch (error) {
      if (options.signal?.aborted) throw error;
      if (error instanceof ApiAuthError) throw refusedAfter(uncertain, error);
      if (error instanceof ApiRequestError) {
        if (uncertain !== undefined) {
          const landed = await readBack().catch((readError: unknown) => {
            throw readError instanceof ApiAuthError ? refusedAfter(uncertain, readError) : readError;
          });
          if (landed !== undefined) return { record: landed, created: true };
        }
        // The platform's own words; with none (an empty 405), what it answered to what.
        return {
          error: error.platformError === NO_ERROR_TEXT ? error.message : error.platformError,
          status: error.status,
        };
      }
      uncertain = error;
    }
    let landed: T | undefined;
    try {
      landed = await readBack();
    } catch (error) {
      if (error instanceof ApiAuthError) throw refusedAfter(uncertain, error);
      return {
        error: `the create's answer was lost (${describeError(uncertain)}) and reading its slug back failed too (${describeError(error)}); not sent again: the next run finds it if it was created`,
      };
    }
    if (landed !== undefined) return { record: landed, created: true };
    const delayMs = nextRetryDelayMs(
      { retriesSoFar: retries, elapsedMs: performance.now() - startedAt, retryAfterMs: undefined },
      options.retry,
      options.random ?? Math.random,
    );
    if (delayMs === undefined) {
      const attempts = retries + 1;
      return {
        error: `not created after ${attempts} attempt${attempts === 1 ? '' : 's'}: ${describeError(uncertain)}`,
      };
    }
    await sleep(delayMs, undefined, { signal: options.signal });
  }
}

/** A refused key: the record's own request was refused, unless an earlier create of it was lost. */
function refusedAfter(lost: unknown, refusal: ApiAuthError): Error {
  return lost === undefined ? refusal : new CreateUncertainError(lost, refusal);
}
