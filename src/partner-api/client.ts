import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { Pool } from 'undici';
import type { z } from 'zod';
import { type Config, requireApi } from '../config/schema.js';
import type { Logger } from '../log.js';
import { ApiAuthError, ApiRequestError, ApiSchemaError, ApiUnavailableError } from './errors.js';
import { continuationOf, type FetchPage, type Page, paginate } from './paginate.js';
import {
  DEFAULT_BACKOFF,
  type FailureReason,
  isRetryableStatus,
  nextRetryDelayMs,
  parseRetryAfter,
  type RetryPolicy,
} from './retryPolicy.js';
import {
  errorBodySchema,
  type Location,
  locationPageSchema,
  locationSchema,
  type Professional,
  type ProfessionalListItem,
  professionalPageSchema,
  professionalSchema,
  type Review,
  reviewPageSchema,
} from './schema.js';

/** Every path of the platform starts here (spec, introduction). */
export const API_PREFIX = '/api/v1/partner';

/** The counters the client feeds; optional so a one-shot CLI run needs no registry. */
export interface ApiMetrics {
  readonly apiRequests: { inc(labels: { route: string; status: string }): void };
  readonly apiRetries: { inc(labels: { reason: string }): void };
}

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
export type QueryValue = string | number | boolean | null | undefined;

export interface RequestOptions<S extends z.ZodType> {
  /** Query parameters; null and undefined ones are left out. */
  readonly query?: Readonly<Record<string, QueryValue>>;
  /** Sent as JSON. */
  readonly body?: unknown;
  /** Validates the success body; an empty body is validated as `undefined`. */
  readonly schema: S;
  readonly signal?: AbortSignal;
  /** Route template for logs, errors and metrics (`GET /professionals/:slug`); default `METHOD path`. */
  readonly route?: string;
  /**
   * Whether a server error or a lost response may be retried. Default: every method but POST.
   * A non-idempotent request is still retried on 429 and on failures to connect: both mean
   * the platform never acted on it.
   */
  readonly idempotent?: boolean;
}

export interface PartnerApiOptions {
  readonly url: string;
  readonly key: string;
  readonly connectTimeoutMs: number;
  /** Whole request, headers and body; 0 disables it. */
  readonly requestTimeoutMs: number;
  readonly retry: RetryPolicy;
  readonly pageSize: number;
  readonly log: Logger;
  readonly metrics?: ApiMetrics | undefined;
  /** Jitter source; tests make it deterministic. */
  readonly random?: () => number;
}

export interface PartnerApi {
  readonly pageSize: number;
  /** One request with retries, returning the validated body. The base of every typed method. */
  request<S extends z.ZodType>(
    method: HttpMethod,
    path: string,
    options: RequestOptions<S>,
  ): Promise<z.output<S>>;
  /** One page of the review feed (spec 4.3), newest first. */
  reviewPage(
    params: { since: Date | null; cursor: string | null },
    signal?: AbortSignal,
  ): Promise<Page<Review>>;
  /** The review feed from `cursor` (null: the newest) down to `since` (null: the oldest). */
  reviewPages(since: Date | null, cursor: string | null, signal?: AbortSignal): AsyncGenerator<Page<Review>>;
  locationPages(active: boolean, cursor: string | null, signal?: AbortSignal): AsyncGenerator<Page<Location>>;
  professionalPages(
    active: boolean,
    cursor: string | null,
    signal?: AbortSignal,
  ): AsyncGenerator<Page<ProfessionalListItem>>;
  getLocation(slug: string, signal?: AbortSignal): Promise<Location>;
  /** The single read: the only response carrying `location_id`. */
  getProfessional(slug: string, signal?: AbortSignal): Promise<Professional>;
  close(): Promise<void>;
}

/** The client for the configured platform (`REVIEWS_API_URL`, `REVIEWS_API_KEY`). */
export function makePartnerApi(config: Config, log: Logger, metrics?: ApiMetrics): PartnerApi {
  const { url, key } = requireApi(config);
  return createPartnerApi({
    url,
    key,
    connectTimeoutMs: config.api.connectTimeoutMs,
    requestTimeoutMs: config.api.requestTimeoutMs,
    retry: { maxRetries: config.api.maxRetries, budgetMs: config.api.retryBudgetMs, ...DEFAULT_BACKOFF },
    pageSize: config.api.pageSize,
    log,
    metrics,
  });
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
// Errors raised before the request left this machine: safe to retry whatever the method.
const CONNECT_ERRORS = ['ECONNREFUSED', 'UND_ERR_CONNECT_TIMEOUT', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH'];

export function createPartnerApi(options: PartnerApiOptions): PartnerApi {
  const { log, metrics, retry, requestTimeoutMs } = options;
  const random = options.random ?? Math.random;
  const apiKey = options.key;
  const base = new URL(options.url);
  const basePath = base.pathname.replace(/\/+$/, '') + API_PREFIX;
  const pool = new Pool(base.origin, {
    connect: { timeout: options.connectTimeoutMs },
    connections: 16,
    keepAliveTimeout: 30_000,
    headersTimeout: requestTimeoutMs,
    bodyTimeout: requestTimeoutMs,
  });

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
    const timeout = requestTimeoutMs > 0 ? AbortSignal.timeout(requestTimeoutMs) : undefined;
    const signals = [req.signal, timeout].filter((s): s is AbortSignal => s !== undefined);
    const signal = signals.length > 0 ? AbortSignal.any(signals) : undefined;
    let status: number;
    let text: string;
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
      text = await res.body.text();
    } catch (cause) {
      if (req.signal?.aborted) throw req.signal.reason ?? cause;
      const code = (cause as { code?: string }).code ?? '';
      const timedOut = timeout?.aborted === true || TIMEOUT_ERRORS.includes(code);
      const reason: FailureReason = timedOut ? 'timeout' : 'network';
      metrics?.apiRequests.inc({ route, status: reason });
      const what = timedOut ? 'timed out' : `failed (${code || (cause as Error).message})`;
      const error = new ApiUnavailableError(`${route} ${what}`, { route, cause });
      throw new AttemptFailure(reason, idempotent || CONNECT_ERRORS.includes(code), error);
    }
    metrics?.apiRequests.inc({ route, status: String(status) });

    if (status === 401 || status === 403) throw new ApiAuthError({ route, status });
    if (isRetryableStatus(status)) {
      const reason: FailureReason = status === 429 ? 'rate_limited' : 'server_error';
      const error = new ApiUnavailableError(`${route} answered ${status}`, { route, status });
      const retryAfterMs = parseRetryAfter(headers['retry-after'], Date.now());
      throw new AttemptFailure(reason, idempotent || status === 429, error, retryAfterMs);
    }
    if (status < 200 || status > 299) throw new ApiRequestError(platformErrorText(text), { route, status });

    let body: unknown;
    if (text.trim() !== '') {
      try {
        body = JSON.parse(text);
      } catch (cause) {
        // A body cut short in transit: the next attempt will most likely arrive whole.
        const error = new ApiUnavailableError(`${route} returned a body that is not JSON (truncated?)`, {
          route,
          status,
          cause,
        });
        throw new AttemptFailure('malformed_body', idempotent, error);
      }
    }
    const parsed = req.schema.safeParse(body);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      throw new ApiSchemaError(formatPath(issue.path), issue.message, { route, status, cause: parsed.error });
    }
    return parsed.data;
  }

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
        metrics?.apiRetries.inc({ reason: error.reason });
        log.warn(
          { route, reason: error.reason, status: error.error.status, retry: retries + 1, delayMs },
          'partner API request failed; retrying',
        );
        await sleep(delayMs, undefined, { signal: reqOptions.signal });
      }
    }
  }

  const pageOf = <T>(items: T[], pagination: Parameters<typeof continuationOf>[0]): Page<T> => ({
    items,
    nextCursor: continuationOf(pagination),
    receivedAt: new Date(),
  });

  const reviewPage: PartnerApi['reviewPage'] = async ({ since, cursor }, signal) => {
    const body = await request('GET', '/reviews', {
      query: { limit: options.pageSize, since: since?.toISOString(), cursor },
      schema: reviewPageSchema,
      signal,
    });
    return pageOf(body.reviews, body.pagination);
  };

  const listFetcher =
    <T>(kind: 'locations' | 'professionals', active: boolean): FetchPage<T> =>
    async (cursor, signal) => {
      const schema = kind === 'locations' ? locationPageSchema : professionalPageSchema;
      const body = (await request('GET', `/${kind}`, {
        query: { limit: options.pageSize, active: String(active), cursor },
        schema,
        signal,
      })) as Record<string, unknown> & { pagination: Parameters<typeof continuationOf>[0] };
      return pageOf(body[kind] as T[], body.pagination);
    };

  return {
    pageSize: options.pageSize,
    request,
    reviewPage,
    reviewPages: (since, cursor, signal) =>
      paginate<Review>((c, s) => reviewPage({ since, cursor: c }, s), cursor, signal),
    locationPages: (active, cursor, signal) =>
      paginate(listFetcher<Location>('locations', active), cursor, signal),
    professionalPages: (active, cursor, signal) =>
      paginate(listFetcher<ProfessionalListItem>('professionals', active), cursor, signal),
    getLocation: (slug, signal) =>
      request('GET', `/locations/${encodeURIComponent(slug)}`, {
        route: 'GET /locations/:slug',
        schema: locationSchema,
        signal,
      }),
    getProfessional: (slug, signal) =>
      request('GET', `/professionals/${encodeURIComponent(slug)}`, {
        route: 'GET /professionals/:slug',
        schema: professionalSchema,
        signal,
      }),
    close: () => pool.close(),
  };
}

/** `reviews[3].rating` from zod's path. */
export function formatPath(path: ReadonlyArray<PropertyKey>): string {
  if (path.length === 0) return '(body)';
  return path
    .map((p, i) => (typeof p === 'number' ? `[${p}]` : `${i === 0 ? '' : '.'}${String(p)}`))
    .join('');
}

/** The platform's `error` field (spec 7: structure not specified), else a short excerpt of the body. */
export function platformErrorText(text: string): string {
  try {
    const parsed = errorBodySchema.safeParse(JSON.parse(text));
    const error = parsed.success ? parsed.data.error : undefined;
    if (typeof error === 'string' && error !== '') return error;
    if (error !== undefined && error !== null) return JSON.stringify(error).slice(0, 300);
  } catch {
    // not JSON: fall through to the raw excerpt
  }
  const excerpt = text.trim().replace(/\s+/g, ' ').slice(0, 200);
  return excerpt === '' ? '(no error text)' : excerpt;
}
