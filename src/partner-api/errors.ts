import { FatalError, RetryableError } from '../errors.js';

/**
 * Errors of the partner API, in the project's taxonomy. Each keeps the route template (never a
 * URL with ids or the key), the HTTP status when there was one, and the underlying cause.
 */

export interface ApiErrorDetails {
  /** Route template, e.g. `GET /reviews`, `GET /professionals/:slug`. */
  readonly route: string;
  readonly status?: number | undefined;
  readonly cause?: unknown;
  /** The request may have been processed: no complete answer came after it was sent. */
  readonly outcomeUnknown?: boolean | undefined;
  /** How long the platform asked to wait before trying again (`Retry-After`), in milliseconds. */
  readonly retryAfterMs?: number | undefined;
  /** That `Retry-After` is longer than the client's retries wait (retryPolicy). */
  readonly retryAfterOutlastsRetries?: boolean | undefined;
}

/** The platform or the network failed in a way that may pass: 5xx, 429, timeouts, truncated bodies. */
export class ApiUnavailableError extends RetryableError {
  override readonly name = 'ApiUnavailableError';
  readonly route: string;
  readonly status: number | undefined;
  /**
   * True when the request left this machine and no complete answer came back (a timeout, a lost
   * connection, a body cut short): the platform may have acted on it. False for an answer with an
   * error status, and for failures before the request was sent. Unsaid, a failure without a
   * status counts as unknown: the outbox sends an event again only when it is told otherwise.
   */
  readonly outcomeUnknown: boolean;
  /**
   * The platform's `Retry-After` of the last answer, in milliseconds, when it sent one: a caller
   * that keeps the work for later (the events outbox) waits at least that long.
   */
  readonly retryAfterMs: number | undefined;
  /**
   * The `Retry-After` is longer than the client's retries ever wait: it gave up at once, and would
   * on any request sent before the wait is over, so a caller with more to send stops instead.
   * False when there was none, or the retries waited it and the platform still failed.
   */
  readonly retryAfterOutlastsRetries: boolean;
  constructor(message: string, details: ApiErrorDetails) {
    super(message, { cause: details.cause });
    this.route = details.route;
    this.status = details.status;
    this.outcomeUnknown = details.outcomeUnknown ?? details.status === undefined;
    this.retryAfterMs = details.retryAfterMs;
    this.retryAfterOutlastsRetries = details.retryAfterOutlastsRetries ?? false;
  }
}

/** 401/403: nothing will work until the operator fixes the key. */
/** How an ApiAuthError's text begins: `status` finds refused keys in `sync_runs.error` by it. */
export const API_KEY_REFUSED = 'the API key is missing, invalid or inactive';

export class ApiAuthError extends FatalError {
  override readonly name = 'ApiAuthError';
  readonly route: string;
  readonly status: number;
  constructor(details: ApiErrorDetails & { status: number }) {
    super(`${API_KEY_REFUSED} (${details.route} answered ${details.status})`, {
      cause: details.cause,
    });
    this.route = details.route;
    this.status = details.status;
  }
}

/** The platform refused the request itself (404, 409, 422, other 4xx): its `error` text is the message. */
export class ApiRequestError extends FatalError {
  override readonly name = 'ApiRequestError';
  readonly route: string;
  readonly status: number;
  /** The platform's `error` text (or a short excerpt of the body when it had none). */
  readonly platformError: string;
  /**
   * Where a 3xx (never followed) leads, without its query, scrubbed: a caller reading one record
   * can tell the record moved (another slug) from the whole base URL moving.
   */
  readonly redirectedTo: string | undefined;
  constructor(
    platformError: string,
    details: ApiErrorDetails & { status: number; redirectedTo?: string | undefined },
  ) {
    super(`${details.route} answered ${details.status}: ${platformError}`, { cause: details.cause });
    this.route = details.route;
    this.status = details.status;
    this.platformError = platformError;
    this.redirectedTo = details.redirectedTo;
  }
}

/**
 * What an ApiSchemaError and an ApiProtocolError say after their route: a 2xx this client refused.
 * `status` finds them in `sync_runs.error` by it (the platform took the key).
 */
export const INVALID_BODY = 'returned an invalid body';
export const BROKEN_PAGINATION = 'broke the pagination protocol';

/** A complete body that does not match the contract: retrying the same request cannot fix it. */
export class ApiSchemaError extends FatalError {
  override readonly name = 'ApiSchemaError';
  readonly route: string;
  readonly status: number;
  /** Path of the first offending field, e.g. `reviews[3].rating`. */
  readonly field: string;
  constructor(field: string, problem: string, details: ApiErrorDetails & { status: number }) {
    super(`${details.route} ${INVALID_BODY}: ${field}: ${problem}`, { cause: details.cause });
    this.route = details.route;
    this.status = details.status;
    this.field = field;
  }
}

/**
 * Pagination that cannot be trusted (more pages claimed without a cursor, a cursor or a page seen
 * twice, a walk past its page ceiling): following it would loop or stop early and be taken for
 * the end of the feed, which moves a watermark past unread records or marks them removed.
 */
export class ApiProtocolError extends FatalError {
  override readonly name = 'ApiProtocolError';
  readonly route: string;
  constructor(route: string, problem: string) {
    super(`${route} ${BROKEN_PAGINATION}: ${problem}`);
    this.route = route;
  }
}

/**
 * The event could not be written as JSON (a value JSON has no form for, a string past what the
 * runtime can build): thrown before any request is made, so the platform cannot have it.
 */
export class EventBodyError extends Error {
  override readonly name = 'EventBodyError';
}
