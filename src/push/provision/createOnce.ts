import { setTimeout as sleep } from 'node:timers/promises';
import { describeError } from '../../errors.js';
import { ApiAuthError, ApiRequestError, ApiUnavailableError } from '../../partner-api/errors.js';
import { NO_ERROR_TEXT } from '../../partner-api/http.js';
import { nextRetryDelayMs, type RetryPolicy } from '../../partner-api/retryPolicy.js';

export type CreateOutcome<T> =
  | { readonly record: T; readonly created: boolean }
  | { readonly error: string; readonly status?: number };

export interface CreateOnceOptions {
  /**
   * The platform client's retry policy (`API_MAX_RETRIES`, `API_RETRY_BUDGET_SECONDS`, its
   * backoff): the transport re-sends a POST only when it surely was not acted on (a 429, no
   * connection), so a create sent again after a lost answer is retried here, under the same bounds.
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
 * Where a create whose answer was lost may have left its record, and whether it may be sent again.
 */
export interface LandedLookup<T> {
  /**
   * The record the lost create made, or undefined when none is found: by the slug sent, then among
   * the records listed since, by the other fields sent (the platform may give it another slug).
   * Throws when it cannot tell (a read failing, several records matching).
   */
  readonly find: () => Promise<T | undefined>;
  /**
   * The platform refuses a second create of the same record (a professional's email: 409, spec
   * 4.5), so one found nowhere may be sent again: had the first landed, the second is refused, not
   * doubled. Without such a rule (locations), it is not sent again.
   */
  readonly duplicateRefused: boolean;
}

/**
 * Creates a record once. A POST whose answer was lost (a timeout, a 5xx, a body cut short) is never
 * sent blindly again: the record is looked for first (`lookup.find`), and a record found is the
 * one created. One found nowhere is sent again only when the platform would refuse a duplicate,
 * after the client's backoff and within its retry count and time budget; a refusal that follows a
 * lost answer is looked up once more, since it may be our own earlier request. A create that
 * surely never reached the platform (no connection, 429) has been retried by the transport: its
 * error is thrown, as a read's is.
 */
export async function createOnce<T>(
  create: () => Promise<T>,
  lookup: LandedLookup<T>,
  options: CreateOnceOptions,
): Promise<CreateOutcome<T>> {
  const startedAt = performance.now();
  // The last failure after which the record may exist: then it is looked for before anything else.
  let lost: unknown;
  for (let retries = 0; ; retries++) {
    let failure: unknown;
    try {
      return { record: await create(), created: true };
    } catch (error) {
      if (options.signal?.aborted) throw error;
      if (error instanceof ApiAuthError) throw refusedAfter(lost, error);
      if (error instanceof ApiRequestError) return refusal(error, lost, lookup, options.signal);
      failure = error;
      // The transport has already sent it again within the retry bounds: once more each here
      // would square them, against a platform asking for less (a 429). Its failure is the
      // caller's, as a read's would be: a 429 stops the run.
      if (!mayHaveLanded(error) && lost === undefined) throw error;
      if (mayHaveLanded(error)) lost = error;
    }
    if (lost !== undefined) {
      const search = await lookFor(lookup, lost, options.signal);
      if ('error' in search) return search;
      if (search.landed !== undefined) return { record: search.landed, created: true };
      if (!lookup.duplicateRefused) {
        return {
          error: `the create's answer was lost (${describeError(lost)}), and no record with its slug or with the fields sent is found: not sent again, since it may still appear. Check the account, then run again: it is created if still missing`,
        };
      }
    }
    const delayMs = nextRetryDelayMs(
      { retriesSoFar: retries, elapsedMs: performance.now() - startedAt, retryAfterMs: undefined },
      options.retry,
      options.random ?? Math.random,
    );
    if (delayMs === undefined) {
      const attempts = retries + 1;
      return {
        error: `not created after ${attempts} attempt${attempts === 1 ? '' : 's'}: ${describeError(failure)}`,
      };
    }
    await sleep(delayMs, undefined, { signal: options.signal });
  }
}

/**
 * The platform refused the create. After a lost answer the refusal may be of our own record (a
 * professional's email taken by it): looked up once more, and reported as such if not found.
 */
async function refusal<T>(
  error: ApiRequestError,
  lost: unknown,
  lookup: LandedLookup<T>,
  signal: AbortSignal | undefined,
): Promise<CreateOutcome<T>> {
  // The platform's own words; with none (an empty 405), what it answered to what.
  const text = error.platformError === NO_ERROR_TEXT ? error.message : error.platformError;
  if (lost === undefined) return { error: text, status: error.status };
  const search = await lookFor(lookup, lost, signal);
  if ('error' in search) return search;
  if (search.landed !== undefined) return { record: search.landed, created: true };
  return {
    error: `${text}, after an earlier create's answer was lost (${describeError(lost)}): that create may have made it, under a slug not found; not sent again`,
    status: error.status,
  };
}

/**
 * Looks for the record of a create whose answer was `lost`: found or not, or why nobody can tell.
 * A refused key ends the run, as a shutdown does; the record then stays interrupted, not failed.
 */
async function lookFor<T>(
  lookup: LandedLookup<T>,
  lost: unknown,
  signal: AbortSignal | undefined,
): Promise<{ readonly landed: T | undefined } | { readonly error: string }> {
  try {
    return { landed: await lookup.find() };
  } catch (error) {
    if (signal?.aborted) throw error;
    if (error instanceof ApiAuthError) throw refusedAfter(lost, error);
    return {
      error: `the create's answer was lost (${describeError(lost)}) and looking for its record failed (${describeError(error)}); not sent again: the next run finds it if it was created`,
    };
  }
}

/** Whether the platform may have acted on a create that failed so: all but one never sent, or a 429. */
function mayHaveLanded(error: unknown): boolean {
  if (!(error instanceof ApiUnavailableError)) return true;
  return error.outcomeUnknown || (error.status !== undefined && error.status !== 429);
}

/** A refused key: the record's own request was refused, unless an earlier create of it was lost. */
function refusedAfter(lost: unknown, refusal: ApiAuthError): Error {
  return lost === undefined ? refusal : new CreateUncertainError(lost, refusal);
}
