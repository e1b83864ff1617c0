import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Dispatcher, Pool } from 'undici';
import { z } from 'zod';
import { untilAborted } from '../boundedWait.js';
import { storableText } from '../db/storableText.js';
import { answerFreshFor } from '../freshAnswer.js';
import { type Logger, SecretScrubber } from '../log.js';
import { ApiAuthError, ApiRequestError, ApiSchemaError, ApiUnavailableError } from './errors.js';
import { saysRefused } from './refusal.js';
import { requestSignal } from './requestSignal.js';
import {
  type FailureReason,
  failedBeforeSending,
  isRetryableStatus,
  nextRetryDelayMs,
  parseRetryAfter,
  type RetryPolicy,
  retryAfterOutlastsRetries,
} from './retryPolicy.js';

/**
 * The transport to the platform: one connection pool, the API key, timeouts, retries and the
 * error taxonomy. It knows no endpoint; the resource modules beside it do.
 */

/** Every path of the platform starts here (spec, introduction). */
export const API_PREFIX = '/api/v1/partner';

/**
 * The most of an answer that is read. A page holds at most 100 records (spec 8), some hundreds of
 * kilobytes even with long comments: a body past this is not a page but a platform gone wrong,
 * and reading, parsing and validating it whole would exhaust the heap or block the event loop for
 * seconds. Generous, so that no real answer ever meets it.
 */
export const MAX_BODY_BYTES = 16 * 1024 * 1024;

/** The counters the client feeds; optional so a one-shot CLI run needs no registry. */
export interface ApiMetrics {
  readonly apiRequests: { inc(labels: { route: string; status: string }): void };
  readonly apiRetries: { inc(labels: { reason: string }): void };
  readonly apiKeyRefusals?: { inc(): void };
  readonly apiDuration?: { observe(labels: { route: string; status_class: string }, seconds: number): void };
}

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
export type QueryValue = string | number | boolean | null | undefined;

export interface RequestOptions<S extends z.ZodType> {
  /** Query parameters; null and undefined ones are left out. */
  readonly query?: Readonly<Record<string, QueryValue>>;
  /** Sent as JSON. */
  readonly body?: unknown;
  /**
   * Validates the success body. An empty body is validated as `undefined`, and so is one that is
   * not JSON or larger than MAX_BODY_BYTES when the schema accepts `undefined`: the caller needs
   * no answer.
   */
  readonly schema: S;
  /**
   * For answers the spec does not show, where a caller must not take a 2xx for done: a success
   * body saying the platform refused the request after all (`200 {"success": false, "error":
   * "…"}`) fails as an ApiRequestError with the platform's text, as a 4xx would.
   */
  readonly refusalInBody?: boolean;
  readonly signal?: AbortSignal | undefined;
  /** Route template for logs, errors and metrics (`GET /professionals/:slug`); default `METHOD path`. */
  readonly route?: string;
  /**
   * Whether a server error or a lost response may be retried. Default: every method but POST.
   * A non-idempotent request is still retried on 429 and on failures to connect: both mean
   * the platform never acted on it.
   */
  readonly idempotent?: boolean;
}

export interface HttpClientOptions {
  readonly url: string;
  readonly key: string;
  readonly connectTimeoutMs: number;
  /** Whole request, headers and body; 0 disables it. */
  readonly requestTimeoutMs: number;
  readonly retry: RetryPolicy;
  readonly log: Logger;
  readonly metrics?: ApiMetrics | undefined;
  /** Jitter source; tests make it deterministic. */
  readonly random?: () => number;
}

export interface HttpClient {
  /** One request with retries, returning the validated body. */
  request<S extends z.ZodType>(
    method: HttpMethod,
    path: string,
    options: RequestOptions<S>,
  ): Promise<z.output<S>>;
  readonly log: Logger;
  /**
   * Calls `listener` with the delay whenever the platform answered 429 and a request waits for
   * it: concurrent senders pause together instead of each finding the limit on its own.
   */
  onRateLimited(listener: (delayMs: number) => void): () => void;
  /**
   * Shutdown has begun: requests in flight finish, but none waits out a back-off or starts a
   * retry any more; each fails at once with its last error, so a job in a long back-off (a
   * Retry-After of minutes) does not hold the shutdown.
   */
  stopRetrying(): void;
  close(): Promise<void>;
}

/** Why an attempt failed and whether retrying it is allowed; thrown inside the retry loop only. */
class AttemptFailure extends Error {
  constructor(
    readonly reason: FailureReason,
    readonly retryable: boolean,
    readonly error: ApiUnavailableError,
    readonly retryAfterMs?: number,
  ) {
    super(error.message);
  }
}

const TIMEOUT_ERRORS = ['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT'];
/**
 * The scrubber of the platform's answers: the key as sent, URL-encoded, or in any JSON escaping
 * (the text is scrubbed before it is parsed, and encoders differ: PHP writes "/" as "\/", Go "<"
 * as "\u003c", and any character may be "\uXXXX").
 * A platform quoting our key in an error body must not put it in an error, a log line, a stored
 * `last_error` or `sync_runs.error`: scrubbing the text on arrival covers every one of them.
 */
export function keyScrubber(key: string): SecretScrubber {
  return new SecretScrubber([key]);
}

export function makeHttpClient(options: HttpClientOptions): HttpClient {
  const { log, metrics, retry, requestTimeoutMs } = options;
  const random = options.random ?? Math.random;
  const apiKey = options.key;
  const scrubber = keyScrubber(apiKey);
  const rateLimitListeners = new Set<(delayMs: number) => void>();
  const stopRetries = new AbortController();
  const base = new URL(options.url);
  const basePath = base.pathname.replace(/\/+$/, '') + API_PREFIX;
  const pool = new Pool(base.origin, {
    connect: { timeout: options.connectTimeoutMs },
    connections: 16,
    keepAliveTimeout: 30_000,
    headersTimeout: requestTimeoutMs,
    bodyTimeout: requestTimeoutMs,
  });

  // Whether the platform accepts the key: one GET of the feed from now, which holds nothing. A yes
  // stands for KEY_CHECK_FRESH_MS (a run of refused records costs one check, not one each); a no,
  // or no answer at all, is never kept: the 403 then counts as the key's, as it always did.
  const keyAccepted = answerFreshFor(KEY_CHECK_FRESH_MS, () => askKey(), { forgetNo: true });
  const closing = new AbortController();
  const askKey = async (): Promise<boolean> => {
    const { signal, dispose } = requestSignal(closing.signal, requestTimeoutMs);
    try {
      const res = await pool.request({
        method: 'GET',
        path: pathWithQuery('/reviews', { limit: 1, since: new Date().toISOString() }),
        headers: { 'x-api-key': apiKey, accept: 'application/json' },
        signal,
      });
      await res.body.dump();
      const yes = res.statusCode >= 200 && res.statusCode <= 299;
      if (!yes)
        log.warn({ status: res.statusCode }, 'the platform refused the API key on a check after a 403');
      return yes;
    } catch (error) {
      log.warn({ err: error }, 'the platform did not answer a check of the API key after a 403');
      return false;
    } finally {
      dispose();
    }
  };

  const pathWithQuery = (path: string, query: RequestOptions<z.ZodType>['query']): string => {
    const params = new URLSearchParams();
    for (const [name, value] of Object.entries(query ?? {})) {
      if (value !== undefined && value !== null) params.set(name, String(value));
    }
    const search = params.toString();
    return `${basePath}${path}${search === '' ? '' : `?${search}`}`;
  };

  async function attempt<S extends z.ZodType>(
    method: HttpMethod,
    fullPath: string,
    route: string,
    req: RequestOptions<S>,
    idempotent: boolean,
  ): Promise<z.output<S>> {
    const { signal, timedOut: hitTimeout, dispose } = requestSignal(req.signal, requestTimeoutMs);
    const started = performance.now();
    const observe = (statusClass: string) =>
      metrics?.apiDuration?.observe(
        { route, status_class: statusClass },
        (performance.now() - started) / 1000,
      );
    let status: number;
    let text = '';
    let whole = false;
    // Why the body was lost after the status had arrived (the connection dropped, the body timed
    // out, the caller stopped): the platform answered, so this is not a request that went unheard.
    let bodyLost: unknown;
    let headers: Record<string, string | string[] | undefined>;
    try {
      const res = await pool.request({
        method,
        path: fullPath,
        headers: {
          'x-api-key': apiKey,
          accept: 'application/json',
          ...(req.body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: req.body === undefined ? undefined : JSON.stringify(req.body),
        signal,
      });
      status = res.statusCode;
      headers = res.headers;
      try {
        const body = await readBounded(res.body, MAX_BODY_BYTES);
        text = scrubber.scrub(body.text);
        whole = body.whole;
      } catch (cause) {
        bodyLost = cause;
      }
    } catch (cause) {
      if (req.signal?.aborted) throw req.signal.reason ?? cause;
      const code = (cause as { code?: string }).code ?? '';
      const timedOut = hitTimeout() || TIMEOUT_ERRORS.includes(code);
      const reason: FailureReason = timedOut ? 'timeout' : 'network';
      metrics?.apiRequests.inc({ route, status: reason });
      observe(reason);
      const what = timedOut ? 'timed out' : `failed (${code || scrubber.scrub((cause as Error).message)})`;
      const notSent = failedBeforeSending(cause);
      const error = new ApiUnavailableError(`${route} ${what}`, { route, cause, outcomeUnknown: !notSent });
      throw new AttemptFailure(reason, idempotent || notSent, error);
    } finally {
      dispose();
    }
    metrics?.apiRequests.inc({ route, status: String(status) });
    observe(`${Math.floor(status / 100)}xx`);

    if (status === 401) {
      metrics?.apiKeyRefusals?.inc();
      throw new ApiAuthError({ route, status });
    }
    if (status === 403) {
      // Spec 5: a bad key is a 401. A 403 may still be a deactivated key, or this one request
      // refused (a contact who opted out): the key is asked about apart, so that one record
      // refused fails alone instead of stopping every other as a bad key does.
      if (await untilAborted(keyAccepted(), req.signal)) {
        throw new ApiRequestError(platformErrorText(text), { route, status });
      }
      metrics?.apiKeyRefusals?.inc();
      throw new ApiAuthError({ route, status });
    }
    // A 408: the platform (or a proxy before it) did not get the request in time and did not act
    // on it. A read is sent again as after a 5xx; a POST's 408 is its caller's to judge, as before
    // (the outbox and the contacts push send it again later), since a proxy's word that nothing
    // was passed on is not the platform's.
    if (isRetryableStatus(status) || (status === 408 && idempotent)) {
      const reason: FailureReason =
        status === 429 ? 'rate_limited' : status === 408 ? 'timeout' : 'server_error';
      const retryAfterMs = parseRetryAfter(headers['retry-after'], Date.now());
      const outlasts = retryAfterMs !== undefined && retryAfterOutlastsRetries(retryAfterMs, retry);
      if (outlasts) holdOff(route, status, retryAfterMs);
      const error = new ApiUnavailableError(`${route} answered ${status}`, {
        route,
        status,
        retryAfterMs,
        retryAfterOutlastsRetries: outlasts,
      });
      throw new AttemptFailure(reason, idempotent || status === 429, error, retryAfterMs);
    }
    if (status >= 300 && status <= 399) {
      const redirectedTo = redirectTarget(headers.location, scrubber);
      throw new ApiRequestError(redirectText(redirectedTo), { route, status, redirectedTo });
    }
    if (status < 200 || status > 299) throw new ApiRequestError(platformErrorText(text), { route, status });
    // The answer of a request that acted (a POST, a DELETE), when the caller can do without it:
    // undefined when it cannot. A read's answer is what it is for: a GET never does without it,
    // or an HTML page in place of the webhook list would read as "none" and register another.
    const doneWithout = (): { data: z.output<S> } | undefined => {
      if (method === 'GET') return undefined;
      const parsed = req.schema.safeParse(undefined);
      return parsed.success ? { data: parsed.data } : undefined;
    };
    if (bodyLost !== undefined) {
      // Accepted: the status says so. What cannot be sent again harmlessly is not, when the caller
      // can do without the answer (an event, a contact without external_id); anything else is
      // sent again for the whole answer, unless the caller has stopped.
      const done = doneWithout();
      if (done !== undefined && !idempotent) return done.data;
      if (req.signal?.aborted) throw req.signal.reason ?? bodyLost;
      const code = (bodyLost as { code?: string }).code ?? '';
      const what = code || scrubber.scrub((bodyLost as Error).message);
      const error = new ApiUnavailableError(
        `${route} answered ${status}, then its body was cut off (${what})`,
        // No status: a connection lost mid-body is the transport's failure (a platform going
        // down), not an answer to be read as the record's (see directoryPages).
        { route, cause: bodyLost, outcomeUnknown: true },
      );
      throw new AttemptFailure('network', idempotent, error);
    }
    if (!whole) {
      // Accepted, like a body that is not JSON, when the caller needs no answer: the request was
      // acted on, and sending it again would repeat it.
      const done = doneWithout();
      if (done !== undefined) return done.data;
      throw new ApiSchemaError('(body)', `is larger than ${MAX_BODY_BYTES} bytes`, { route, status });
    }

    let body: unknown;
    if (text.trim() !== '') {
      try {
        body = JSON.parse(text);
      } catch (cause) {
        // The status says the request was accepted. An answer the caller can do without (one the
        // spec does not show) is no reason to send it again, to a real person: not when it is no
        // JSON at all (`OK`, `Created`), nor when sending it again is not harmless. One that
        // begins as JSON and breaks off was cut short in transit, and an HTML page may be a
        // proxy's (a maintenance page served 200) that never passed the request on: an idempotent
        // request is sent again, harmlessly, for the platform's own answer.
        const done = doneWithout();
        const cutShort = /^\s*[[{"]/.test(text);
        const page = /^\s*</.test(text);
        if (done !== undefined && !((cutShort || page) && idempotent)) return done.data;
        const what = page ? 'an HTML page, perhaps not the platform' : 'truncated?';
        const error = new ApiUnavailableError(`${route} returned a body that is not JSON (${what})`, {
          route,
          status,
          cause,
          // A 2xx status came with it: the platform most likely acted on the request.
          outcomeUnknown: true,
        });
        throw new AttemptFailure('malformed_body', idempotent, error);
      }
    }
    if (req.refusalInBody && saysRefused(body)) {
      throw new ApiRequestError(platformErrorText(text), { route, status });
    }
    const parsed = req.schema.safeParse(body);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      throw new ApiSchemaError(formatPath(issue.path), issue.message, { route, status, cause: parsed.error });
    }
    return parsed.data;
  }

  // The waits the platform asked for with a `Retry-After` longer than the retries ever wait (see
  // retryAfterOutlastsRetries), by route: until one is over, every request of its route would give
  // up at once on the same answer, so none is sent. Kept by the client, which outlives a job's run:
  // a job run every minute would otherwise ask again on every run. By route, not for the whole
  // client: a wait asked of one part of the platform (the contacts) must not stop the others (the
  // review feed), and a limit on the key costs one answer per route to learn.
  const heldOff = new Map<string, { readonly until: number; readonly status: number }>();
  const holdOff = (route: string, status: number, retryAfterMs: number) => {
    const until = performance.now() + retryAfterMs;
    if ((heldOff.get(route)?.until ?? 0) >= until) return;
    heldOff.set(route, { until, status });
    log.warn(
      { route, status, retryAfterMs },
      'the platform asked to wait longer than the retries do; this route is not sent to until then',
    );
  };
  /** The failure of a request not sent while its route's wait lasts, as its answer would fail. */
  const heldOffError = (route: string): ApiUnavailableError | undefined => {
    const held = heldOff.get(route);
    if (held === undefined) return undefined;
    const leftMs = Math.ceil(held.until - performance.now());
    if (leftMs <= 0) {
      heldOff.delete(route);
      return undefined;
    }
    return new ApiUnavailableError(
      `${route} not sent: the platform answered ${held.status} with a Retry-After that ends in ${Math.ceil(leftMs / 1000)} s`,
      {
        route,
        status: held.status,
        retryAfterMs: leftMs,
        retryAfterOutlastsRetries: true,
        outcomeUnknown: false,
      },
    );
  };

  async function request<S extends z.ZodType>(
    method: HttpMethod,
    path: string,
    reqOptions: RequestOptions<S>,
  ): Promise<z.output<S>> {
    const route = reqOptions.route ?? `${method} ${path}`;
    const idempotent = reqOptions.idempotent ?? method !== 'POST';
    const fullPath = pathWithQuery(path, reqOptions.query);
    const startedAt = performance.now();
    for (let retries = 0; ; retries++) {
      const held = heldOffError(route);
      if (held !== undefined) {
        metrics?.apiRequests.inc({ route, status: 'held_off' });
        throw held;
      }
      try {
        return await attempt(method, fullPath, route, reqOptions, idempotent);
      } catch (error) {
        if (!(error instanceof AttemptFailure)) throw error;
        const delayMs = error.retryable
          ? nextRetryDelayMs(
              {
                retriesSoFar: retries,
                elapsedMs: performance.now() - startedAt,
                retryAfterMs: error.retryAfterMs,
              },
              retry,
              random,
            )
          : undefined;
        if (delayMs === undefined) {
          if (retries > 0) error.error.message += ` (gave up after ${retries} retries)`;
          throw error.error;
        }
        if (stopRetries.signal.aborted) {
          error.error.message += ' (not retried: shutting down)';
          throw error.error;
        }
        metrics?.apiRetries.inc({ reason: error.reason });
        if (error.reason === 'rate_limited') for (const listener of rateLimitListeners) listener(delayMs);
        log.warn(
          { route, reason: error.reason, status: error.error.status, retry: retries + 1, delayMs },
          'partner API request failed; retrying',
        );
        // Retries are rare: combining the two signals costs nothing here (unlike per request).
        const waiting = reqOptions.signal
          ? AbortSignal.any([reqOptions.signal, stopRetries.signal])
          : stopRetries.signal;
        try {
          await sleep(delayMs, undefined, { signal: waiting });
        } catch (aborted) {
          if (reqOptions.signal?.aborted || !stopRetries.signal.aborted) throw aborted;
          error.error.message += ' (not retried: shutting down)';
          throw error.error;
        }
      }
    }
  }

  const onRateLimited = (listener: (delayMs: number) => void) => {
    rateLimitListeners.add(listener);
    return () => void rateLimitListeners.delete(listener);
  };
  const close = () => {
    // The key check after a 403 is shared, and no caller's signal stops it: one left behind by a
    // caller that gave up would hold the pool's close for its whole timeout (for ever with none).
    closing.abort();
    return pool.close();
  };
  return { request, log, onRateLimited, stopRetrying: () => stopRetries.abort(), close };
}

/**
 * An answer's body as text, read as it arrives and no further than `maxBytes`: past that, the
 * first `maxBytes` are kept (an error status still has its excerpt) and the stream is destroyed,
 * which drops the connection instead of reading the rest.
 */
async function readBounded(
  body: Dispatcher.ResponseData['body'],
  maxBytes: number,
): Promise<{ text: string; whole: boolean }> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    if (size + chunk.length > maxBytes) {
      chunks.push(chunk.subarray(0, maxBytes - size));
      // undici reports its own abort as an error: nobody else listens to this stream any more.
      body.on('error', () => {});
      body.destroy();
      return { text: utf8Text(chunks, maxBytes), whole: false };
    }
    chunks.push(chunk);
    size += chunk.length;
  }
  return { text: utf8Text(chunks, size), whole: true };
}

function utf8Text(chunks: readonly Buffer[], size: number): string {
  const bytes = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
  // As undici's own `text()` did: a byte order mark in front is no part of the JSON.
  const start = bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf ? 3 : 0;
  return bytes.toString('utf8', start);
}

/** `reviews[3].rating` from zod's path. */
export function formatPath(path: ReadonlyArray<PropertyKey>): string {
  if (path.length === 0) return '(body)';
  return path
    .map((p, i) => (typeof p === 'number' ? `[${p}]` : `${i === 0 ? '' : '.'}${String(p)}`))
    .join('');
}

/** Error bodies (spec 7): the structure of `error` is not specified, so anything is accepted. */
const errorBodySchema = z.object({ error: z.unknown() }).partial();

/**
 * A field of an answer whose shape the spec does not show (an id, a status), as text that can be
 * stored: a string or a number, bounded, U+0000 as U+FFFD; anything else null. It is recorded
 * after the request was sent, in one statement with other outcomes, which must not fail on it.
 */
export function answerText(value: unknown): string | null {
  if (typeof value !== 'string' && typeof value !== 'number') return null;
  return storableText(String(value).slice(0, 200));
}

/**
 * How long the platform's acceptance of the key, asked after a 403, stands for later 403s. A 403
 * it covers fails that record alone (a contact, an event for `events retry`), so a key deactivated
 * within this time of a yes fails the records refused meanwhile instead of stopping them all: kept
 * short, since one GET every few seconds is nothing beside a push's own requests.
 */
const KEY_CHECK_FRESH_MS = 5_000;

/** What `platformErrorText` gives for an empty body. */
export const NO_ERROR_TEXT = '(no error text)';

/**
 * The error text of a redirect, which the client never follows: the key goes to REVIEWS_API_URL's
 * host and nowhere else.
 */
function redirectText(to: string | undefined): string {
  const where = to === undefined ? '' : ` to ${to}`;
  return `redirected${where}, not followed: the platform's base URL (REVIEWS_API_URL) is redirected; set it to where it leads`;
}

/** Where a redirect leads, without its query (which may carry a token), scrubbed; undefined if nowhere. */
function redirectTarget(
  location: string | string[] | undefined,
  scrubber: SecretScrubber,
): string | undefined {
  const first = Array.isArray(location) ? location[0] : location;
  const to = first?.split(/[?#]/, 1)[0]?.trim().slice(0, 200);
  return to === undefined || to === '' ? undefined : scrubber.scrub(storableText(to));
}

/**
 * The platform's `error` field (spec 7: structure not specified), else a short excerpt of the body.
 * Bounded, and storable: it becomes the stored error text of a contact, an event or a run, and a
 * write that fails on it would lose the record of a request that was sent.
 */
export function platformErrorText(text: string): string {
  return storableText(errorTextOf(text));
}

function errorTextOf(text: string): string {
  try {
    const parsed = errorBodySchema.safeParse(JSON.parse(text));
    const error = parsed.success ? parsed.data.error : undefined;
    if (typeof error === 'string' && error !== '') return error.slice(0, 300);
    if (error !== undefined && error !== null) return JSON.stringify(error).slice(0, 300);
  } catch {
    // not JSON: fall through to the raw excerpt
  }
  const excerpt = text.trim().replace(/\s+/g, ' ').slice(0, 200);
  return excerpt === '' ? NO_ERROR_TEXT : excerpt;
}
