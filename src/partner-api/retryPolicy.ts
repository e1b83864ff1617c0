/**
 * When to retry a failed request and how long to wait first: pure, so the whole policy is
 * tested without a network. Exponential backoff with full jitter (a uniformly random wait between
 * zero and the exponential cap) spreads retries of many clients; a `Retry-After` from the
 * platform overrides the guess. Both the number of retries and the total time are bounded.
 */

export interface RetryPolicy {
  /** Retries after the first attempt; 0 disables retrying. */
  readonly maxRetries: number;
  /** Total time from the first attempt after which no retry is started. */
  readonly budgetMs: number;
  /** Cap of the first retry's wait; doubles with every retry. */
  readonly baseDelayMs: number;
  /** No single wait is longer than this, except one the platform asked for. */
  readonly maxDelayMs: number;
}

export const DEFAULT_BACKOFF = { baseDelayMs: 250, maxDelayMs: 15_000 } as const;

/** Why an attempt failed, as far as the retry decision cares. */
export type FailureReason = 'network' | 'timeout' | 'rate_limited' | 'server_error' | 'malformed_body';

/** Full jitter: uniform in [0, min(maxDelay, base * 2^retry)). `retry` counts from 0. */
export function backoffDelayMs(retry: number, policy: RetryPolicy, random: () => number): number {
  const cap = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** Math.min(retry, 30));
  return Math.floor(random() * cap);
}

/**
 * `Retry-After` as milliseconds: delta-seconds or an HTTP date (RFC 9110 10.2.3). Two forms outside
 * the RFC that proxies and frameworks send are read too, since ignoring them means retrying at
 * once: seconds with a fraction (rounded up), and the header sent twice and folded into one
 * (`120, 120`: the first). Anything else, or a date in the past, is undefined (then the backoff
 * decides).
 */
export function parseRetryAfter(value: string | string[] | undefined, now: number): number | undefined {
  const text = (Array.isArray(value) ? value[0] : value)?.trim();
  if (text === undefined || text === '') return undefined;
  const seconds = /^(\d+(?:\.\d+)?)(?:\s*,.*)?$/.exec(text);
  if (seconds !== null) return Math.ceil(Number(seconds[1]) * 1000);
  // An HTTP date always names its day and month; Date.parse alone would accept "-1" as a year.
  const at = /[a-z]{3}/i.test(text) ? Date.parse(text) : Number.NaN;
  if (Number.isNaN(at)) return undefined;
  const delta = at - now;
  return Math.max(delta, 0);
}

/** Statuses worth retrying: rate limiting and the platform's own failures. */
export function isRetryableStatus(status: number): boolean {
  return status === 429 || status >= 500;
}

export interface RetryInput {
  /** Retries already made (0 after the first attempt failed). */
  readonly retriesSoFar: number;
  /** Time since the first attempt started. */
  readonly elapsedMs: number;
  /** What the platform asked for with `Retry-After`, when it did. */
  readonly retryAfterMs: number | undefined;
}

/**
 * The wait before the next attempt, or undefined to give up: out of retries, or the wait would
 * end past the budget (a `Retry-After` longer than what is left is not worth sleeping through).
 */
export function nextRetryDelayMs(
  input: RetryInput,
  policy: RetryPolicy,
  random: () => number,
): number | undefined {
  if (input.retriesSoFar >= policy.maxRetries) return undefined;
  const delay = input.retryAfterMs ?? backoffDelayMs(input.retriesSoFar, policy, random);
  if (input.elapsedMs + delay > policy.budgetMs) return undefined;
  return delay;
}

/**
 * Whether the platform's `Retry-After` is longer than the client's retries ever wait: past the
 * budget, or no retries at all. The request that met it gave up at once, and so would any request
 * sent before the wait is over: a caller with more to send keeps it for then instead.
 */
export function retryAfterOutlastsRetries(retryAfterMs: number, policy: RetryPolicy): boolean {
  const fresh = { retriesSoFar: 0, elapsedMs: 0, retryAfterMs };
  return retryAfterMs > 0 && nextRetryDelayMs(fresh, policy, () => 0) === undefined;
}

/**
 * The platform's certificate refused (self-signed, expired, unknown issuer, another host's name).
 * Node checks it at the end of a new connection's handshake and destroys the socket before
 * `secureConnect`; undici writes a request only on a socket past `secureConnect`, and rejects the
 * request with Node's error itself (the client's cause, not wrapped). Node's verification codes
 * (OpenSSL's X509_V_ERR_ names, less OUT_OF_MEM, too generic a name to be sure of) and its own for
 * a host name not in the certificate. Never ERR_SSL_*: OpenSSL's errors on the connection itself
 * (a bad record, an alert from the platform) may come after the request was written.
 */
const CERTIFICATE_REFUSED_CODES = [
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_DECRYPT_CERT_SIGNATURE',
  'UNABLE_TO_DECODE_ISSUER_PUBLIC_KEY',
  'UNABLE_TO_GET_CRL',
  'UNABLE_TO_DECRYPT_CRL_SIGNATURE',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'CERT_SIGNATURE_FAILURE',
  'CERT_NOT_YET_VALID',
  'CERT_HAS_EXPIRED',
  'ERROR_IN_CERT_NOT_BEFORE_FIELD',
  'ERROR_IN_CERT_NOT_AFTER_FIELD',
  'CERT_CHAIN_TOO_LONG',
  'CERT_REVOKED',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'INVALID_CA',
  'INVALID_PURPOSE',
  'PATH_LENGTH_EXCEEDED',
  'HOSTNAME_MISMATCH',
  'CRL_SIGNATURE_FAILURE',
  'CRL_NOT_YET_VALID',
  'CRL_HAS_EXPIRED',
  'ERROR_IN_CRL_LAST_UPDATE_FIELD',
  'ERROR_IN_CRL_NEXT_UPDATE_FIELD',
  'ERR_TLS_CERT_ALTNAME_INVALID',
];

/**
 * Codes of failures raised before any byte of the request was written, whatever the system call:
 * undici refusing an argument while it builds the request (a header value such as a key holding a
 * line break), a connection never made (refused, timed out, its certificate refused), a name not
 * resolved.
 */
const BEFORE_SENDING_CODES: ReadonlySet<string> = new Set([
  'UND_ERR_INVALID_ARG',
  'UND_ERR_CONNECT_TIMEOUT',
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  ...CERTIFICATE_REFUSED_CODES,
]);
/**
 * The system calls whose failure leaves nothing sent: the name lookup and the TCP connect (host or
 * network unreachable, refused by a firewall). The same codes on an established connection
 * (`read`, `write`, or no system call named) may come after the request was written.
 */
const BEFORE_SENDING_SYSCALLS: ReadonlySet<string> = new Set(['getaddrinfo', 'connect']);

/**
 * Whether a request that failed without an answer (`cause`, as the client raised it) failed before
 * anything of it left this process: safe to send again whatever the method, and the platform
 * cannot have acted on it. In doubt, no.
 */
export function failedBeforeSending(cause: unknown): boolean {
  if (typeof cause !== 'object' || cause === null) return false;
  const { code, syscall } = cause as { code?: unknown; syscall?: unknown };
  if (typeof code === 'string' && BEFORE_SENDING_CODES.has(code)) return true;
  return typeof syscall === 'string' && BEFORE_SENDING_SYSCALLS.has(syscall);
}
